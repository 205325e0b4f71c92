import Foundation
import HeraldDomain
import HeraldStore
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §11.5 over HTTP: an event older than the app's `maxEventAgeSeconds` when Herald applies it
/// changes state as usual but makes no job, and the explain endpoint says `STALE`.
@Suite("Staleness", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct StalenessTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let now = nowMilliseconds()
    static let day: Int64 = 86_400_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func app(_ settings: String? = nil) throws -> TestApp {
        let app = try environment.makeApp(prefix: "stale")
        if let settings {
            let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey,
                                          headers: ["Content-Type": "application/json"], body: Array(settings.utf8))
            #expect(patched.status == 200, "\(patched.text)")
        }
        try app.ingest(["alice", "bob", "carol"].enumerated().map {
            Events.member("j-\($0.element)", "member.joined", uid: $0.element, at: now - 10 * Self.day + Int64($0.offset))
        }, client: client)
        return app
    }

    func ready(_ app: TestApp) throws -> Int {
        try client.get("/v1/jobs/stats", token: app.workerKey).json["ready"] as? Int ?? -1
    }

    func explain(_ app: TestApp, _ uid: String, _ message: String) throws -> String? {
        try client.get("/v1/users/\(uid)/messages/\(message)/routing", token: app.serverKey).json["reason"] as? String
    }

    @Test("a day-old backlog changes subscriptions and the inbox but makes no job; explain says STALE")
    func backlog() throws {
        let app = try app()
        #expect(try client.get("/v1/settings/notifications", token: app.serverKey).json["maxEventAgeSeconds"] as? Int == 86_400)
        let old = now - 2 * Self.day
        try app.ingest([Events.message("e1", id: "m1", sender: "bob", at: old, text: "old plan"),
                        Events.message("e2", id: "r1", sender: "alice", parent: "m1", at: old + 1, mentions: ["carol"])], client: client)
        #expect(try ready(app) == 0, "no job for a stale event")
        #expect(try app.subscribed("carol", "m1", client: client) == true, "the mention still subscribes")
        #expect(try app.subscribed("alice", "m1", client: client) == true)
        let inbox = try client.get("/v1/users/carol/threads", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        #expect(inbox.first?["unreadMentionCount"] as? Int == 1, "unread counts as usual")
        #expect(try explain(app, "carol", "r1") == "STALE")
        #expect(try explain(app, "bob", "r1") == "STALE")
        #expect(try explain(app, "alice", "r1") == "SENDER")

        // A fresh reply in the same thread notifies as usual; its explain is not STALE.
        try app.ingest([Events.message("e3", id: "r2", sender: "bob", parent: "m1", at: now - 1000)], client: client)
        #expect(try ready(app) == 2, "alice and carol, subscribed")
        #expect(try explain(app, "carol", "r2") != "STALE")

        // An edit that mentions bob a day and a half late makes no mention job either.
        try app.ingest([Events.edit("e4", id: "r1", sender: "alice", parent: "m1", at: now - Self.day - 3_600_000, mentions: ["carol", "bob"])],
                       client: client)
        #expect(try ready(app) == 2)
    }

    @Test("maxEventAgeSeconds 0 turns the rule off; a shorter age applies sooner; bad values are refused")
    func setting() throws {
        let off = try app(#"{"maxEventAgeSeconds": 0}"#)
        try off.ingest([Events.message("e1", id: "m1", sender: "bob", at: now - 5 * Self.day)], client: client)
        #expect(try ready(off) == 2, "alice and carol get the old message")

        let short = try app(#"{"maxEventAgeSeconds": 60}"#)
        try short.ingest([Events.message("e1", id: "m1", sender: "bob", at: now - 120_000),
                          Events.message("e2", id: "m2", sender: "bob", at: now - 1000)], client: client)
        #expect(try ready(short) == 2, "only m2 notifies")
        #expect(try explain(short, "alice", "m1") == "STALE")

        for bad in [#"{"maxEventAgeSeconds": -1}"#, #"{"maxEventAgeSeconds": 31536001}"#, #"{"maxEventAgeSeconds": "1"}"#] {
            let refused = try client.send("PATCH", "/v1/settings/notifications", token: short.serverKey,
                                          headers: ["Content-Type": "application/json"], body: Array(bad.utf8))
            #expect(refused.status == 400 && refused.errorParams["field"] as? String == "maxEventAgeSeconds", "\(bad)")
        }
    }

    /// The jobs and explain judge an event at the same time, Herald's time of applying it (taken
    /// as its transaction asks for its locks), which its event row keeps (`Routing.EventAge`).
    /// The jobs were judged at the clock's time when the routing ran, explain at the event row's
    /// default, the transaction's start: a batch that waited for its thread's lock past its
    /// event's limit got no job while explain said it notified.
    @Test("jobs and explain judge staleness at the same time, when the event was applied, across a wait for its thread")
    func sameTime() throws {
        let app = try app(#"{"maxEventAgeSeconds": 3}"#)
        let blocker = try environment.connection()
        try blocker.query("BEGIN")
        try blocker.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app.id) || ':' || \(LockSet.threadKey("m1")), 0))")
        let client = self.client
        // 1 s old when posted: fresh for 2 s more (the request reaches its transaction well
        // within that), stale after the 4 s wait
        let posted = Thread.detachNewThreadResult {
            try? client.post("/v1/events", token: app.ingestKey, json: Events.json([
                Events.message("e1", id: "m1", sender: "bob", at: nowMilliseconds() - 1000),
            ]))
        }
        Thread.sleep(forTimeInterval: 4)
        try blocker.query("COMMIT")
        let answer = try #require(posted.wait(seconds: 10) ?? nil)
        #expect(answer.json["accepted"] as? Int == 1)
        // fresh when applied, before the wait: both notified, as explain says
        let jobs = try ready(app)
        let reasons = [try explain(app, "alice", "m1"), try explain(app, "carol", "m1")]
        #expect(jobs == 2 && reasons == ["allMessages", "allMessages"], "jobs \(jobs), explain \(reasons)")
    }

    @Test("a stale message in a large group makes no fan-out task")
    func largeGroup() throws {
        let app = try app(#"{"largeGroupThreshold": 2}"#)
        try app.ingest([Events.message("e1", id: "m1", sender: "bob", at: now - 2 * Self.day)], client: client)
        try app.ingest([Events.message("e2", id: "m2", sender: "bob", at: now - 1000)], client: client)
        #expect(try eventually { try ready(app) == 2 }, "the fresh message's task makes its jobs")
        let connection = try environment.connection()
        let tasks = try connection.query("SELECT message_id FROM fanout_tasks WHERE app = \(app.id) ORDER BY message_id")
        #expect(try tasks.map { try $0.decode(0, as: String.self) } == ["m2"])
    }
}
