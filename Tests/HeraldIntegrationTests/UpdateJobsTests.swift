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

    @Test("an unclaimed job shows the new text; messageEdited DONT_NOTIFY makes no update")
    func inPlaceAndOff() throws {
        let app = try environment.makeApp(prefix: "update", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "draft")], client: client)
        _ = try claim(app, recipients: ["bob"])   // carol's waits
        let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"messageEdited": "DONT_NOTIFY"}"#.utf8))
        #expect(patched.status == 200 && patched.json["messageEdited"] as? String == "DONT_NOTIFY")
        try app.ingest([Events.edit("e2", id: "m1", sender: "alice", at: past + 10, mentions: nil, text: "final")], client: client)
        let waiting = try environment.connection().query("SELECT count(*) FROM jobs WHERE app = $1 AND kind = 'update'", [app.id])
        #expect(try waiting[0].decode(0, as: Int.self) == 0, "DONT_NOTIFY: no update for bob")
        try environment.connection().query("UPDATE jobs SET available_at = 0 WHERE app = $1 AND state = 'ready'", [app.id])
        let carol = try claim(app)
        #expect(carol.count == 1 && (carol.first?["notification"] as? [String: Any])?["body"] as? String == "final", "the waiting job shows the new text")
    }
}
