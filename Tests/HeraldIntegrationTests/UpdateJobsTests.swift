import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §11.4, edits, over HTTP: an edited message's unclaimed jobs show the new text; each
/// recipient already pushed it gets one silent `update` job; a newly mentioned one gets the
/// mention job instead.
@Suite("Update jobs", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct UpdateJobsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func claim(_ app: TestApp, recipients: Set<String>? = nil) throws -> [[String: Any]] {
        let jobs = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 1000}"#).json["jobs"] as? [[String: Any]] ?? []
        let kept = recipients.map { wanted in jobs.filter { wanted.contains($0["recipient"] as? String ?? "") } } ?? jobs
        let others = jobs.filter { job in !kept.contains { $0["id"] as? String == job["id"] as? String } }
        // The jobs not asked for go back (failed with a long retry), so that they wait unclaimed.
        if !others.isEmpty {
            let failed = others.map { ["id": $0["id"]!, "attempt": $0["attempt"]!, "error": "later", "retryAfterSeconds": 3600] }
            _ = try client.post("/v1/jobs/fail", token: app.workerKey, json: Events.json(["jobs": failed]))
        }
        let acks = kept.map { ["id": $0["id"]!, "attempt": $0["attempt"]!] }
        if !acks.isEmpty { _ = try client.post("/v1/jobs/ack", token: app.workerKey, json: Events.json(["jobs": acks])) }
        return kept
    }

    @Test("pushed recipients get one silent update with the new body and the same collapseId; the newly mentioned a mention job; redelivery adds none")
    func updates() throws {
        let app = try environment.makeApp(prefix: "update", members: ["alice", "bob", "carol", "dave"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "lunch at 12", mentions: ["bob"])], client: client)
        #expect(try claim(app).count == 3, "bob (mention), carol and dave")
        let edit = Events.edit("e2", id: "m1", sender: "alice", at: past + 10, mentions: ["bob", "carol"], text: "lunch at 1")
        try app.ingest([edit], client: client)
        try app.ingest([edit], client: client, accepted: 0)
        let jobs = try claim(app)
        let byRecipient = Dictionary(uniqueKeysWithValues: jobs.map { ($0["recipient"] as? String ?? "", $0) })
        #expect(Set(byRecipient.keys) == ["bob", "carol", "dave"])
        let bob = try #require(byRecipient["bob"])
        #expect(bob["kind"] as? String == "update" && bob["reason"] as? String == "edited")
        let notification = try #require(bob["notification"] as? [String: Any])
        #expect(notification["body"] as? String == "alice mentioned you: lunch at 1", "the template of the job it updates, the new text")
        #expect(notification["collapseId"] as? String == "m1" && notification["silent"] as? Bool == true)
        #expect((bob["event"] as? [String: Any])?["id"] as? String == "e2")
        let carol = try #require(byRecipient["carol"])
        #expect(carol["kind"] as? String == "message" && carol["reason"] as? String == "mention", "newly mentioned: the mention job instead")
        #expect((carol["notification"] as? [String: Any])?["silent"] == nil)
        #expect(byRecipient["dave"]?["kind"] as? String == "update")
    }

    @Test("explain names an edit's event: the newly mentioned its mention job, the pushed their update, others not, a stale edit STALE (issue 32, item 13)")
    func explainEdit() throws {
        let app = try environment.makeApp(prefix: "update", members: ["alice", "bob", "carol", "dave", "erin"], joinedAt: past - 100_000)
        func explain(_ uid: String, _ message: String, _ event: String) throws -> HTTPResult {
            try client.get("/v1/users/\(uid)/messages/\(message)/routing?event=\(event.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)",
                           token: app.serverKey)
        }
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "lunch at 12", mentions: ["bob"])], client: client)
        #expect(try claim(app, recipients: ["bob", "carol", "dave"]).count == 3, "erin's job waits unclaimed")
        try app.ingest([Events.edit("e2", id: "m1", sender: "alice", at: past + 10, mentions: ["bob", "carol"], text: "lunch at 1")],
                       client: client)
        let jobs = Dictionary(uniqueKeysWithValues: try claim(app, recipients: ["bob", "carol", "dave"]).map {
            ($0["recipient"] as? String ?? "", $0["id"] as? String ?? "")
        })
        #expect(jobs.count == 3)
        let carol = try explain("carol", "m1", "chat/e2")
        #expect(carol.status == 200 && carol.json["notified"] as? Bool == true && carol.json["reason"] as? String == "mention"
                    && carol.json["jobId"] as? String == jobs["carol"], "newly mentioned: \(carol.text)")
        let bob = try explain("bob", "m1", "chat/e2").json
        #expect(bob["notified"] as? Bool == true && bob["reason"] as? String == "edited" && bob["jobId"] as? String == jobs["bob"], "\(bob)")
        let erin = try explain("erin", "m1", "chat/e2").json
        #expect(erin["notified"] as? Bool == false && erin["reason"] as? String == "NOT_NEWLY_MENTIONED" && erin["jobId"] is NSNull, "\(erin)")
        #expect(try explain("alice", "m1", "chat/e2").json["reason"] as? String == "SENDER")
        // the message's own event still explains the message
        #expect(try explain("bob", "m1", "chat/e1").json["reason"] as? String == "mention")

        // a day-old edit newly mentions dave: no job, and explain says why
        try app.ingest([Events.message("e3", id: "m2", sender: "alice", at: nowMilliseconds() - 3 * 86_400_000, text: "old"),
                        Events.edit("e4", id: "m2", sender: "alice", at: nowMilliseconds() - 2 * 86_400_000, mentions: ["dave"], text: "older")],
                       client: client)
        #expect(try claim(app).isEmpty)
        for uid in ["dave", "erin"] {
            let stale = try explain(uid, "m2", "chat/e4")
            #expect(stale.status == 200 && stale.json["notified"] as? Bool == false && stale.json["reason"] as? String == "STALE", "\(uid): \(stale.text)")
        }
        // an edit of another message is no event of this one
        let other = try explain("dave", "m1", "chat/e4")
        #expect(other.status == 404 && (other.json["error"] as? [String: Any])?["code"] as? String == "ERR_MESSAGE_ID_NOT_FOUND")
    }

    @Test("an unclaimed job shows the new text; messageEdited DONT_NOTIFY makes no update")
    func inPlaceAndOff() throws {
        let app = try environment.makeApp(prefix: "update", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "draft")], client: client)
        _ = try claim(app, recipients: ["bob"])   // carol's waits
        let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"messageEdited": "DONT_NOTIFY"}"#.utf8))
        #expect(patched.status == 200 && patched.json["messageEdited"] as? String == "DONT_NOTIFY")
        try app.ingest([Events.edit("e2", id: "m1", sender: "alice", at: past + 10, mentions: nil, text: "final")], client: client)
        let waiting = try environment.connection().query("SELECT count(*) FROM jobs WHERE app = \(app.id) AND kind = 'update'")
        #expect(try waiting[0].decode(0, as: Int.self) == 0, "DONT_NOTIFY: no update for bob")
        try environment.connection().query("UPDATE job_rows SET available_at = 0 WHERE app = \(app.id) AND state = 'ready'")
        let carol = try claim(app)
        #expect(carol.count == 1 && (carol.first?["notification"] as? [String: Any])?["body"] as? String == "final", "the waiting job shows the new text")
    }
}
