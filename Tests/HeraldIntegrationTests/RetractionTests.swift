import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §11.4, deletions, over HTTP: a deleted message's unclaimed jobs are cancelled, and each
/// recipient who was already pushed one of them (or one of its replies') gets one retract job.
@Suite("Retractions", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct RetractionTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func claim(_ app: TestApp, max: Int = 1000) throws -> [[String: Any]] {
        try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": \#(max)}"#).json["jobs"] as? [[String: Any]] ?? []
    }

    func ack(_ app: TestApp, _ jobs: [[String: Any]]) throws {
        let acks = jobs.map { ["id": $0["id"]!, "attempt": $0["attempt"]!] }
        #expect(try client.post("/v1/jobs/ack", token: app.workerKey, json: Events.json(["jobs": acks])).status == 200)
    }

    @Test("a pushed message deleted: one retract job per pushed recipient with the collapse ids; unclaimed ones are cancelled; redelivery adds none")
    func deleted() throws {
        let app = try environment.makeApp(prefix: "retract", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "oops"),
                        Events.message("e2", id: "m1-r1", sender: "bob", parent: "m1", at: past + 1, text: "what?")], client: client)
        // bob's and carol's jobs for m1, and alice's for the reply, are pushed; carol's for the
        // reply failed (not delivered) and waits for its retry.
        let claimed = try claim(app, max: 1000)
        let isCarolsReply = { (job: [String: Any]) in
            job["recipient"] as? String == "carol" && (job["data"] as? [String: Any])?["messageId"] as? String == "m1-r1"
        }
        try ack(app, claimed.filter { !isCarolsReply($0) })
        let failed = claimed.filter(isCarolsReply).map { ["id": $0["id"]!, "attempt": $0["attempt"]!, "error": "timeout", "retryAfterSeconds": 3600] }
        #expect(failed.count == 1)
        #expect(try client.post("/v1/jobs/fail", token: app.workerKey, json: Events.json(["jobs": failed])).json["retrying"] as? Int == 1)
        let deletion = Events.delete("d1", id: "m1", at: past + 10)
        try app.ingest([deletion], client: client)
        try app.ingest([deletion], client: client, accepted: 0)
        let retractions = try claim(app).filter { $0["kind"] as? String == "retract" }
        let byRecipient = Dictionary(uniqueKeysWithValues: retractions.map { ($0["recipient"] as? String ?? "", $0) })
        #expect(Set(byRecipient.keys) == ["alice", "bob", "carol"], "everyone was pushed something of the thread")
        let carol = try #require(byRecipient["carol"])
        #expect(carol["notification"] is NSNull && carol["reason"] as? String == "deleted")
        let data = try #require(carol["data"] as? [String: Any])
        #expect(data["messageId"] as? String == "m1" && data["parentMessageId"] is NSNull)
        #expect(data["collapseIds"] as? [String] == ["m1"], "carol's reply job was never delivered: cancelled, not retracted")
        #expect((byRecipient["alice"]?["data"] as? [String: Any])?["collapseIds"] as? [String] == ["m1-r1"])
        #expect((carol["event"] as? [String: Any])?["id"] as? String == "d1")
        let cancelled = try environment.connection().query("SELECT count(*) FROM jobs WHERE app = \(app.id) AND state = 'cancelled'")
        #expect(try cancelled[0].decode(0, as: Int.self) == 1)
    }

    @Test("messageDeleted DONT_NOTIFY makes no retraction (unclaimed jobs are still cancelled); a message never pushed makes none")
    func dontNotify() throws {
        let app = try environment.makeApp(prefix: "retract", members: ["alice", "bob"], joinedAt: past - 100_000)
        let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"messageDeleted": "DONT_NOTIFY"}"#.utf8))
        #expect(patched.status == 200 && patched.json["messageDeleted"] as? String == "DONT_NOTIFY")
        let refused = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"messageDeleted": "SOMETIMES"}"#.utf8))
        #expect(refused.status == 400 && refused.errorParams["field"] as? String == "messageDeleted")
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "oops")], client: client)
        try ack(app, try claim(app))
        try app.ingest([Events.delete("d1", id: "m1", at: past + 10)], client: client)
        #expect(try claim(app).isEmpty)

        let other = try environment.makeApp(prefix: "retract", members: ["alice", "bob"], joinedAt: past - 100_000)
        try other.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "oops"), Events.delete("d1", id: "m1", at: past + 10)],
                         client: client)
        #expect(try claim(other).isEmpty, "nothing was pushed, nothing to retract")
    }
}
