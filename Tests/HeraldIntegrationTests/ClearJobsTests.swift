import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §13.2 over HTTP: a read that moves past replies whose jobs were claimed makes one
/// `clear` job per thread, without the device that read.
@Suite("Clear jobs", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ClearJobsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// alice starts threads m1 (and m2, …) in g1 (and those of `elsewhere` in g2); bob replies.
    func setUp(threads: [String] = ["m1"], elsewhere: [String] = [], replies: Int = 2) throws -> TestApp {
        let app = try environment.makeApp(prefix: "clear")
        for group in ["g1", "g2"] {
            try app.ingest(["alice", "bob"].map { Events.member("join-\(group)-\($0)", "member.joined", group: group, uid: $0, at: past - 100_000) },
                           client: client)
        }
        for (index, (thread, group)) in (threads.map { ($0, "g1") } + elsewhere.map { ($0, "g2") }).enumerated() {
            let base = past + Int64(index) * 1000
            try app.ingest([Events.message("e-\(thread)", id: thread, sender: "alice", group: group, at: base, text: "topic")]
                           + (1...replies).map { Events.message("e-\(thread)-r\($0)", id: "\(thread)-r\($0)", sender: "bob", group: group,
                                                                parent: thread, at: base + Int64($0), text: "reply \($0)") },
                           client: client)
        }
        for (id, platform) in [("phone", "apns"), ("tablet", "fcm")] {
            #expect(try client.send("PUT", "/v1/users/alice/devices/\(id)", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                    body: Array(Events.json(["platform": platform, "token": "t-\(id)"]).utf8)).status == 200)
        }
        return app
    }

    func claim(_ app: TestApp) throws -> [[String: Any]] {
        let jobs = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 1000}"#).json["jobs"] as? [[String: Any]] ?? []
        let acks = jobs.map { ["id": $0["id"]!, "attempt": $0["attempt"]!] }
        #expect(try client.post("/v1/jobs/ack", token: app.workerKey, json: Events.json(["jobs": acks])).status == 200)
        return jobs
    }

    func read(_ app: TestApp, _ thread: String, _ body: [String: Any]) throws -> HTTPResult {
        try client.post("/v1/users/alice/threads/\(thread)/read", token: app.serverKey, json: Events.json(body))
    }

    @Test("a read past claimed replies: one clear job with their collapse ids and the badge, without the reading device")
    func readOne() throws {
        let app = try setUp(threads: ["m1", "m2"])
        let delivered = try claim(app).filter { $0["recipient"] as? String == "alice" }
        #expect(delivered.count == 4, "alice was notified of both replies in both threads")
        let marked = try read(app, "m1", ["deviceId": "phone"])
        #expect(marked.status == 200 && marked.json["unreadReplyCount"] as? Int == 0, "\(marked.text)")
        let jobs = try claim(app)
        #expect(jobs.count == 1)
        let clear = try #require(jobs.first)
        #expect(clear["kind"] as? String == "clear" && clear["recipient"] as? String == "alice" && clear["reason"] as? String == "read")
        #expect(clear["notification"] is NSNull)
        let data = try #require(clear["data"] as? [String: Any])
        #expect(data["parentMessageId"] as? String == "m1" && data["collapseIds"] as? [String] == ["m1-r2", "m1-r1"])
        #expect(data["badge"] as? Int == 1, "m2 is still unread")
        #expect(clear["excludeDevice"] as? String == "phone")
        #expect((clear["devices"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["tablet"], "not the device that read")
        let event = clear["event"] as? [String: Any]
        #expect(event?["type"] as? String == "thread.read" && event?["source"] as? String == "herald" && event?["id"] as? String == "read:m1-r2")

        #expect(try read(app, "m1", ["deviceId": "phone"]).status == 200)
        #expect(try claim(app).isEmpty, "a read that does not move makes no job")
        let refused = try read(app, "m1", ["deviceId": 7])
        #expect(refused.status == 400 && refused.errorParams["field"] as? String == "deviceId")
    }

    @Test("only the replies between the old and the new mark, only claimed ones; without deviceId every device")
    func between() throws {
        let app = try setUp(replies: 3)
        #expect(try read(app, "m1", ["messageId": "m1-r1"]).status == 200)
        #expect(try claim(app).filter { $0["kind"] as? String == "clear" }.isEmpty, "nothing was claimed before the read")
        #expect(try read(app, "m1", ["messageId": "m1-r2"]).status == 200)
        let first = try claim(app)
        let clear = try #require(first.first { $0["kind"] as? String == "clear" })
        #expect((clear["data"] as? [String: Any])?["collapseIds"] as? [String] == ["m1-r2"], "r1 was read before any claim; r3 is after the mark")
        #expect(clear["excludeDevice"] is NSNull && (clear["devices"] as? [[String: Any]])?.count == 2)
        #expect(try read(app, "m1", [:]).status == 200)
        let second = try claim(app)
        #expect(second.count == 1 && (second.first?["data"] as? [String: Any])?["collapseIds"] as? [String] == ["m1-r3"])
    }

    @Test("marking every thread read: one clear job per thread with claimed replies; the badge counts what is left unread")
    func readAll() throws {
        let app = try setUp(threads: ["m1", "m2", "m3"], elsewhere: ["m9"], replies: 1)
        _ = try claim(app)
        let marked = try client.post("/v1/users/alice/threads/read?guid=g1", token: app.serverKey, json: #"{"deviceId": "tablet"}"#)
        #expect(marked.status == 200 && marked.json["updated"] as? Int == 3, "\(marked.text)")
        let jobs = try claim(app)
        #expect(jobs.count == 3 && jobs.allSatisfy { $0["kind"] as? String == "clear" && $0["excludeDevice"] as? String == "tablet" })
        #expect(Set(jobs.compactMap { ($0["data"] as? [String: Any])?["parentMessageId"] as? String }) == ["m1", "m2", "m3"])
        #expect(jobs.allSatisfy { ($0["data"] as? [String: Any])?["badge"] as? Int == 1 }, "m9, in g2, is still unread")
        let refused = try client.post("/v1/users/alice/threads/read", token: app.serverKey, json: #"{"deviceId": ""}"#)
        #expect(refused.status == 400 && refused.errorParams["field"] as? String == "deviceId")
    }
}
