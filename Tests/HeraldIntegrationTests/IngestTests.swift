import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Postgres
@testable import HeraldTestSupport
import Testing

@Suite("Ingest: CloudEvents over HTTP", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct IngestTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func count(_ sql: SQL) throws -> Int {
        let rows = try environment.connection().query(sql)
        return try rows[0].decode(0, as: Int.self)
    }

    func results(_ response: HTTPResult) -> [[String: Any]] {
        response.json["results"] as? [[String: Any]] ?? []
    }

    @Test("structured mode: one event as application/cloudevents+json")
    func structured() throws {
        let app = try environment.makeApp()
        let event = Events.message("e1", id: "m1", sender: "alice", at: 1000)
        let response = try client.post("/v1/events", token: app.ingestKey, json: Events.json(event),
                                       headers: ["Content-Type": "application/cloudevents+json"])
        #expect(response.status == 200)
        #expect(response.json["accepted"] as? Int == 1)
        #expect(results(response).first?["status"] as? String == "accepted")
        #expect(try app.subscribed("alice", "m1", client: client) == true)
    }

    @Test("batched mode and application/json arrays and objects")
    func batchedAndPlainJSON() throws {
        let app = try environment.makeApp()
        let batch = try app.post([Events.message("e1", id: "m1", sender: "alice", at: 1000),
                                  Events.message("e2", id: "m2", sender: "bob", at: 1001)], client: client)
        #expect(batch.status == 200)
        #expect(batch.json["accepted"] as? Int == 2)
        let array = try app.post([Events.message("e3", id: "m3", sender: "carol", at: 1002)], client: client,
                                 contentType: "application/json")
        #expect(array.json["accepted"] as? Int == 1)
        let object = try client.post("/v1/events", token: app.ingestKey,
                                     json: Events.json(Events.message("e4", id: "m4", sender: "dave", at: 1003)))
        #expect(object.json["accepted"] as? Int == 1)
        for (uid, message) in [("alice", "m1"), ("bob", "m2"), ("carol", "m3"), ("dave", "m4")] {
            #expect(try app.subscribed(uid, message, client: client) == true)
        }
    }

    @Test("binary mode: attributes in ce- headers, data in the body")
    func binary() throws {
        let app = try environment.makeApp()
        let data = Events.json(["id": "m1", "sender": "alice", "receiverType": "group", "receiver": "g1", "sentAt": 1000])
        let response = try client.post("/v1/events", token: app.ingestKey, json: data, headers: [
            "ce-specversion": "1.0", "ce-id": "b1", "ce-source": "bus", "ce-type": "message.created", "ce-time": "2026-11-29T00:00:00Z",
        ])
        #expect(response.status == 200)
        let result = try #require(results(response).first)
        #expect(result["status"] as? String == "accepted")
        #expect(result["id"] as? String == "b1")
        #expect(result["source"] as? String == "bus")
        let again = try client.post("/v1/events", token: app.ingestKey, json: data, headers: [
            "ce-specversion": "1.0", "ce-id": "b1", "ce-source": "bus", "ce-type": "message.created",
        ])
        #expect(results(again).first?["status"] as? String == "duplicate")
        let badVersion = try client.post("/v1/events", token: app.ingestKey, json: data, headers: [
            "ce-specversion": "0.3", "ce-id": "b2", "ce-source": "bus", "ce-type": "message.created",
        ])
        #expect(results(badVersion).first?["status"] as? String == "rejected")
    }

    @Test("a mixed batch: per-event results in order, only the valid events take effect")
    func mixedBatch() throws {
        let app = try environment.makeApp()
        try app.ingest([Events.message("old", id: "m0", sender: "zed", at: 900)], client: client)
        let response = try app.post([
            Events.message("e1", id: "m1", sender: "alice", at: 1000),
            Events.message("old", id: "m0", sender: "zed", at: 900),                  // redelivered
            Events.message("e1", id: "m1", sender: "alice", at: 1000),                // twice in one batch
            Events.message("e2", id: "m2", sender: "", at: 1000),                     // invalid sender
            Events.event("e3", "message.exploded", ["id": "x"]),                      // unknown type
            ["specversion": "0.3", "id": "e4", "source": "chat", "type": "message.created", "data": [:]],
            ["id": "e5", "type": "message.created"],                                  // no specversion, no source
            Events.message("e6", id: "m6", sender: "bob", parent: "m1", at: 1001, mentions: ["alice"]),
            ["specversion": "1.0", "id": "e7", "source": "chat", "type": "member.joined", "data": "nope"],
            42,
        ], client: client)
        #expect(response.status == 200)
        #expect(response.json["accepted"] as? Int == 2)
        #expect(response.json["duplicates"] as? Int == 2)
        #expect(response.json["rejected"] as? Int == 6)
        let statuses = results(response).map { $0["status"] as? String ?? "?" }
        #expect(statuses == ["accepted", "duplicate", "duplicate", "rejected", "rejected", "rejected", "rejected",
                             "accepted", "rejected", "rejected"])
        let items = results(response)
        #expect(((items[3]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data.sender")
        #expect((items[4]["error"] as? [String: Any])?["code"] as? String == "ERR_UNKNOWN_EVENT_TYPE")
        #expect(((items[5]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "specversion")
        #expect(items[6]["source"] is NSNull)
        #expect(items[9]["id"] is NSNull)
        #expect(((items[8]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data")

        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id)") == 3, "m0, m1, m6 only")
        #expect(try count("SELECT count(*) FROM events WHERE app = \(app.id)") == 3)
        #expect(try app.subscribed("bob", "m1", client: client) == true)

        // Rejected events are listed for operators, newest first, with the event as sent.
        let rejected = try client.get("/v1/events/rejected?limit=1000", token: app.serverKey)
        #expect(rejected.status == 200)
        let list = rejected.json["data"] as? [[String: Any]] ?? []
        #expect(list.count == 6)
        #expect(list.first?["event"] as? Int == 42)
        #expect(list.last?["id"] as? String == "e2")
        #expect(((list.last?["error"] as? [String: Any])?["code"]) as? String == "ERR_BAD_REQUEST")
        #expect(list.last?["receivedAt"] is Int)
        #expect((list.last?["event"] as? [String: Any])?["type"] as? String == "message.created")
        // Paging through them one at a time gives each once.
        var seen = 0
        var cursor: String?
        repeat {
            let page = try client.get("/v1/events/rejected?limit=1" + (cursor.map { "&cursor=\($0)" } ?? ""), token: app.serverKey)
            seen += (page.json["data"] as? [Any])?.count ?? 0
            cursor = (page.json["meta"] as? [String: Any])?["next"] as? String
        } while cursor != nil && seen < 100
        #expect(seen == 6)
    }

    @Test("a rejected event is not remembered: a corrected one with the same id is applied")
    func rejectedNotDeduped() throws {
        let app = try environment.makeApp()
        let bad = try app.post([Events.message("e1", id: "m1", sender: "a/b", at: 1000)], client: client)
        #expect(results(bad).first?["status"] as? String == "rejected")
        let good = try app.post([Events.message("e1", id: "m1", sender: "alice", at: 1000)], client: client)
        #expect(results(good).first?["status"] as? String == "accepted")
    }

    @Test("whole-body problems: not JSON, not an object or array, too many events, wrong type, too large")
    func wholeBody() throws {
        let app = try environment.makeApp()
        let notJSON = try client.post("/v1/events", token: app.ingestKey, json: "{nope")
        #expect(notJSON.status == 400)
        #expect(notJSON.errorCode == "ERR_BAD_REQUEST")
        let scalar = try client.post("/v1/events", token: app.ingestKey, json: "\"hello\"")
        #expect(scalar.status == 400)
        let tooMany = (0...1000).map { Events.message("e\($0)", id: "m\($0)", sender: "alice", at: 1000) }
        let batch = try app.post(tooMany, client: client)
        #expect(batch.status == 400)
        #expect(batch.errorParams["max"] as? Int == 1000)
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id)") == 0, "nothing applied")
        let wrongType = try client.post("/v1/events", token: app.ingestKey, json: "[]", headers: ["Content-Type": "text/plain"])
        #expect(wrongType.status == 415)
        let huge = "[" + String(repeating: " ", count: 4 * 1024 * 1024) + "]"
        #expect(try client.post("/v1/events", token: app.ingestKey, json: huge).status == 413)
        let empty = try app.post([], client: client)
        #expect(empty.status == 200)
        #expect(empty.json["accepted"] as? Int == 0)
    }

    @Test("roles: ingest and server keys may post events; a worker key may not")
    func roles() throws {
        let app = try environment.makeApp()
        let body = Events.json([Events.message("e1", id: "m1", sender: "alice", at: 1000)])
        #expect(try client.post("/v1/events", token: app.workerKey, json: body).status == 403)
        #expect(try client.post("/v1/events", token: app.serverKey, json: body).status == 200)
        #expect(try client.get("/v1/events/rejected", token: app.ingestKey).status == 403)
        #expect(try client.get("/v1/events/rejected", token: app.workerKey).status == 403)
        #expect(try client.get("/v1/users/u/threads/m1/subscription", token: app.ingestKey).status == 403)
    }

    @Test("long text is truncated to 4096 characters, not rejected")
    func longText() throws {
        let app = try environment.makeApp()
        let text = String(repeating: "é", count: 5000)
        let response = try app.post([Events.message("e1", id: "m1", sender: "alice", at: 1000, text: text)], client: client)
        #expect(results(response).first?["status"] as? String == "accepted")
        let rows = try environment.connection().query("SELECT length(text) FROM messages WHERE app = \(app.id) AND id = 'm1'")
        #expect(try rows[0].decode(0, as: Int.self) == 4096)
    }

    @Test("apps are isolated: the same event ids in two apps are both applied")
    func tenantIsolation() throws {
        let a = try environment.makeApp(prefix: "a")
        let b = try environment.makeApp(prefix: "b")
        let event = [Events.message("e1", id: "m1", sender: "alice", at: 1000)]
        #expect(try a.post(event, client: client).json["accepted"] as? Int == 1)
        #expect(try b.post(event, client: client).json["accepted"] as? Int == 1)
        #expect(try client.get("/v1/users/alice/threads/m1/subscription", token: a.serverKey).status == 200)
        // A key of app A cannot read app B's threads through X-App-Id.
        let foreign = try client.get("/v1/users/alice/threads/m1/subscription", token: a.serverKey, headers: ["X-App-Id": b.id])
        #expect(foreign.status == 403)
    }

    /// A server of its own (on the shared database) with one ingest slot and this queue wait,
    /// whose slot is held: a first request's round waits for the group lock that `blocker`
    /// holds until the caller commits it.
    func oneIngestSlotHeld(queueMilliseconds: Int) throws
        -> (server: HeraldServer, client: HTTPClient, app: TestApp, blocker: PostgresConnection, first: ThreadResult<HTTPResult?>) {
        try firstRoundBlocked { configuration in
            configuration.ingestMaxInFlight = 1
            configuration.ingestQueueMilliseconds = queueMilliseconds
        }
    }

    /// A server of its own (on the shared database), set up by `configure`, whose first ingest
    /// request's round waits for the group lock that `blocker` holds until the caller commits it.
    func firstRoundBlocked(_ configure: (inout HeraldDomain.Configuration) -> Void) throws
        -> (server: HeraldServer, client: HTTPClient, app: TestApp, blocker: PostgresConnection, first: ThreadResult<HTTPResult?>) {
        let cluster = try TestEnvironment.shared() // shares the database, not the server
        let url = try #require(cluster.server.service.services.configuration.databaseURL)
        var configuration = try TestEnvironment.configuration(databaseURL: url)
        configure(&configuration)
        let server = try HeraldTestServer.start(configuration)
        let client = HTTPClient(port: server.port)
        let app = try cluster.makeApp()
        let blocker = try cluster.connection()
        try blocker.query("BEGIN")
        try blocker.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app.id) || ':' || 'g:g1', 0))")
        let first = Thread.detachNewThreadResult {
            try? client.post("/v1/events", token: app.ingestKey, json: Events.json([Events.message("e1", id: "m1", sender: "alice", at: 1000)]))
        }
        #expect(eventually(seconds: 5) { server.http.inFlight >= 1 })
        return (server, client, app, blocker, first)
    }

    /// A request waits for its round with its connection suspended (`IngestCombiner.submit`):
    /// a server thread that waited for the round kept every other connection it served waiting
    /// too (docs/subscriptions.md, "Group commit").
    @Test("an ingest request waiting for its round holds no server thread: a server of one thread answers meanwhile")
    func roundsHoldNoThread() throws {
        let (server, _, app, blocker, first) = try firstRoundBlocked { $0.threads = 1 }
        defer { server.shutdown() }
        usleep(200_000)
        // the round waits for the group lock; the server's one thread serves other requests
        var quick = HTTPClient(port: server.port)
        quick.timeoutSeconds = 5
        let other = quick
        #expect(try other.get("/healthz").status == 200)
        let second = Thread.detachNewThreadResult {
            try? other.post("/v1/events", token: app.ingestKey, json: Events.json([Events.message("e2", id: "m2", sender: "bob", at: 1001)]))
        }
        usleep(200_000)
        try blocker.query("COMMIT")
        let answers = [try #require(first.wait(seconds: 10) ?? nil), try #require(second.wait(seconds: 10) ?? nil)]
        #expect(answers.map(\.status) == [200, 200])
        #expect(answers.map { $0.json["accepted"] as? Int } == [1, 1])
    }

    /// Sets `app`'s groups' members (group, JSON array of uids: members already, so that their
    /// messages are no membership evidence, which needs the group's lock alone), posts `after`,
    /// then holds `thread`'s ingest lock in a transaction of the returned connection: commit it
    /// to let the thread's events through.
    func holdingThread(_ thread: String, app: TestApp, members: [(String, String)], after: [[String: Any]] = []) throws -> PostgresConnection {
        for (group, uids) in members {
            let snapshot = try client.send("PUT", "/v1/groups/\(group)/members", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                           body: Array(#"{"members":\#(uids)}"#.utf8))
            #expect(snapshot.status == 200)
        }
        if !after.isEmpty { #expect(try client.post("/v1/events", token: app.ingestKey, json: Events.json(after)).status == 200) }
        let blocker = try environment.connection()
        try blocker.query("BEGIN")
        try blocker.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app.id) || ':' || \(LockSet.threadKey(thread)), 0))")
        return blocker
    }

    /// A batch waits only where it must: its events in threads that another transaction holds
    /// wait for those threads (with what shares a lock with them: the same group's events), the
    /// others are applied at once (`IngestStore.apply`). A whole
    /// batch used to wait for any one of its threads, so W1's batches of 100 replies, which
    /// nearly always share a thread with another batch in flight, ran one after the other.
    @Test("a batch with one of its threads held elsewhere applies its other threads' events at once, then the held ones")
    func heldThreadWaitsAlone() throws {
        let app = try environment.makeApp()
        let blocker = try holdingThread("m1", app: app, members: [("g1", #"["alice"]"#), ("g2", #"["carol"]"#), ("g3", #"["bob"]"#)])
        let client = self.client
        let batch = Thread.detachNewThreadResult {
            try? client.post("/v1/events", token: app.ingestKey, json: Events.json([
                Events.message("e1", id: "m1", sender: "alice", at: 1000),
                Events.message("e2", id: "m2", sender: "bob", group: "g3", at: 1001),
                Events.message("e3", id: "m3", sender: "carol", group: "g2", at: 1002),
            ]))
        }
        // m2 and m3 are committed while m1's thread is held; m1 is not
        #expect(eventually(seconds: 5) {
            (try? count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id IN ('m2', 'm3')")) == 2
        })
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id = 'm1'") == 0)
        try blocker.query("COMMIT")
        let answer = try #require(batch.wait(seconds: 10) ?? nil)
        #expect(answer.status == 200)
        #expect(answer.json["accepted"] as? Int == 3)
        #expect(results(answer).map { $0["id"] as? String } == ["e1", "e2", "e3"])
        #expect(results(answer).map { $0["status"] as? String } == ["accepted", "accepted", "accepted"])
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id = 'm1'") == 1)
        #expect(try app.subscribed("alice", "m1", client: client) == true)
    }

    /// What waits takes what depends on it along (`IngestStore.waitingEvents`): a reply to a
    /// reply whose thread is held waits with it, so it is filed under the root as in one
    /// transaction (a reply to a reply that went first was filed under the reply and routed to
    /// the wrong thread's subscribers); an unrelated group's message still goes first.
    @Test("a batch's events that depend on an event of a held thread wait with it")
    func dependentEventsWait() throws {
        let app = try environment.makeApp()
        let blocker = try holdingThread("r", app: app, members: [("g1", #"["alice","bob","carol"]"#), ("g2", #"["dave"]"#)],
                                        after: [Events.message("e0", id: "r", sender: "alice", at: 1000)])
        let client = self.client
        let batch = Thread.detachNewThreadResult {
            try? client.post("/v1/events", token: app.ingestKey, json: Events.json([
                Events.message("e1", id: "x", sender: "bob", parent: "r", at: 1001),
                Events.message("e2", id: "x2", sender: "carol", parent: "x", at: 1002),
                Events.message("e3", id: "m", sender: "dave", group: "g2", at: 1003),
            ]))
        }
        #expect(eventually(seconds: 5) { (try? count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id = 'm'")) == 1 })
        usleep(200_000)
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id IN ('x', 'x2')") == 0)
        try blocker.query("COMMIT")
        let answer = try #require(batch.wait(seconds: 10) ?? nil)
        #expect(answer.json["accepted"] as? Int == 3)
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id) AND id IN ('x', 'x2') AND parent_id = 'r'") == 2)
    }

    @Test("too many ingest requests at once: 429 with Retry-After once the queue wait runs out, and nothing lost")
    func backpressure() throws {
        let (server, client, app, blocker, first) = try oneIngestSlotHeld(queueMilliseconds: 300)
        defer { server.shutdown() }
        usleep(200_000)
        let second = try client.post("/v1/events", token: app.ingestKey,
                                     json: Events.json([Events.message("e2", id: "m2", sender: "bob", at: 1000)]))
        #expect(second.status == 429)
        #expect(second.errorCode == "ERR_OVERLOADED")
        #expect(second.headers["retry-after"] != nil)
        try blocker.query("COMMIT")
        let firstResponse = try #require(first.wait(seconds: 10) ?? nil)
        #expect(firstResponse.status == 200)
        // The bus retries the refused request later: it is applied then.
        let retried = try client.post("/v1/events", token: app.ingestKey,
                                      json: Events.json([Events.message("e2", id: "m2", sender: "bob", at: 1000)]))
        #expect(retried.status == 200)
        #expect(retried.json["accepted"] as? Int == 1)
    }

    @Test("a request over the ingest limit waits for a slot instead of a 429, and is applied")
    func queuesForASlot() throws {
        let (server, _, app, blocker, first) = try oneIngestSlotHeld(queueMilliseconds: 10_000)
        defer { server.shutdown() }
        let secondClient = HTTPClient(port: server.port)
        let second = Thread.detachNewThreadResult {
            try? secondClient.post("/v1/events", token: app.ingestKey,
                                   json: Events.json([Events.message("e2", id: "m2", sender: "bob", group: "g2", at: 1000)]))
        }
        #expect(eventually(seconds: 5) { server.http.inFlight >= 2 })
        usleep(300_000)
        try blocker.query("COMMIT")
        let firstResponse = try #require(first.wait(seconds: 10) ?? nil)
        let secondResponse = try #require(second.wait(seconds: 10) ?? nil)
        #expect(firstResponse.status == 200)
        #expect(secondResponse.status == 200, "queued, not refused: \(secondResponse.text)")
        #expect(secondResponse.json["accepted"] as? Int == 1)
    }

    @Test("dedupe records older than the retention are forgotten; newer ones are kept")
    func retention() throws {
        let app = try environment.makeApp()
        try app.ingest([Events.message("old", id: "m1", sender: "alice", at: 1000),
                          Events.message("new", id: "m2", sender: "alice", at: 1001)], client: client)
        let connection = try environment.connection()
        try connection.query("UPDATE events SET received_at = herald_now_ms() - 8 * 86400000 WHERE app = \(app.id) AND id = 'old'")
        try environment.server.maintenance.runOnce()
        let left = try connection.query("SELECT id FROM events WHERE app = \(app.id) ORDER BY id")
        #expect(try left.map { try $0.decode(0, as: String.self) } == ["new"])
        // A redelivery after the retention is applied again, and its facts do not double.
        let again = try app.post([Events.message("old", id: "m1", sender: "alice", at: 1000)], client: client)
        #expect(results(again).first?["status"] as? String == "accepted")
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id)") == 2)
    }

    @Test("hostile values are rejected per event, never a 500: NUL bytes, oversized ids, far-future times")
    func hostileValues() throws {
        let app = try environment.makeApp()
        let combining = "a" + String(repeating: "\u{301}", count: 5000)
        let response = try app.post([
            Events.message("e1", id: "m1", sender: "alice", at: 1000, text: "hi\u{0}there"),
            Events.message("e2", id: combining, sender: "alice", at: 1000),
            Events.message("e3", id: "m3", sender: "alice", at: nowMilliseconds() + 2 * 86_400_000),
            Events.message(String(repeating: "x", count: 300), id: "m4", sender: "alice", at: 1000),
            Events.message("e5", id: "m5", sender: "alice", at: 1000),
        ], client: client)
        #expect(response.status == 200)
        let items = results(response)
        #expect(items.map { $0["status"] as? String ?? "" } == ["rejected", "rejected", "rejected", "rejected", "accepted"])
        #expect(((items[0]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data.text")
        #expect(((items[1]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data.id")
        #expect(((items[2]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data.sentAt")
        #expect(((items[3]["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "id")
        let rejected = try client.get("/v1/events/rejected", token: app.serverKey)
        #expect((rejected.json["data"] as? [Any])?.count == 4, "all four recorded")
        let admin = try client.post("/v1/apps", token: TestEnvironment.adminToken, json: Events.json(["id": combining]))
        #expect(admin.status == 400)
    }

    @Test("U+0000 in a rejected event's id, source or type: 200, echoed as sent, listed with U+FFFD")
    func nulInRejectedAttributes() throws {
        let app = try environment.makeApp()
        // Raw JSON: the NULs must reach Herald as \u0000 escapes.
        let body = #"""
            [{"specversion": "1.0", "id": "a\u0000b", "source": "s\u0000", "type": "x\u0000", "data": {}},
             {"specversion": "1.0", "id": "e1", "source": "chat\u0000", "type": "message.created", "data": {}}]
            """#
        let response = try client.post("/v1/events", token: app.ingestKey, json: body)
        #expect(response.status == 200)
        let items = results(response)
        #expect(items.map { $0["status"] as? String } == ["rejected", "rejected"])
        #expect(items.first?["id"] as? String == "a\u{0}b")
        #expect(items.first?["source"] as? String == "s\u{0}")
        #expect(items.last?["source"] as? String == "chat\u{0}")
        let listed = try client.get("/v1/events/rejected", token: app.serverKey)
        #expect(listed.status == 200)
        let rows = listed.json["data"] as? [[String: Any]] ?? []
        #expect(rows.count == 2)
        let first = try #require(rows.last, "newest first")
        #expect(first["id"] as? String == "a\u{FFFD}b")
        #expect(first["source"] as? String == "s\u{FFFD}")
        #expect(first["type"] as? String == "x\u{FFFD}")
        #expect((first["event"] as? [String: Any])?["id"] as? String == "a\u{FFFD}b")
        // Binary mode takes the attributes from headers, where a NUL can arrive too.
        let binary = try client.send("POST", "/v1/events", token: app.ingestKey,
                                     headers: ["ce-specversion": "1.0", "ce-id": "h\u{0}1", "ce-source": "chat", "ce-type": "message.created"])
        #expect(binary.status == 200)
        #expect(results(binary).first?["status"] as? String == "rejected")
    }

    @Test("ids that differ only in byte form are different events and messages")
    func byteWiseIds() throws {
        let app = try environment.makeApp()
        let response = try app.post([Events.message("\u{e9}", id: "\u{e9}", sender: "alice", at: 1000),
                                     Events.message("e\u{301}", id: "e\u{301}", sender: "alice", at: 1001)], client: client)
        #expect(response.json["accepted"] as? Int == 2)
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id)") == 2)
    }

    @Test("ce- headers with a CloudEvents content type are structured mode, not binary")
    func headersWithStructuredBody() throws {
        let app = try environment.makeApp()
        let response = try client.post("/v1/events", token: app.ingestKey,
                                       json: Events.json([Events.message("e1", id: "m1", sender: "alice", at: 1000)]),
                                       headers: ["Content-Type": "application/cloudevents-batch+json", "ce-specversion": "1.0"])
        #expect(response.json["accepted"] as? Int == 1)
    }

    @Test("an edit or a deletion without parentId acts on the reply's thread")
    func withoutParentID() throws {
        let app = try environment.makeApp()
        try app.ingest([Events.member("j1", "member.joined", uid: "carol", at: 1),
                          Events.message("e1", id: "m7", sender: "bob", at: 1000),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: 1001),
                          Events.message("e3", id: "r2", sender: "alice", parent: "m7", at: 1002)], client: client)
        try app.ingest([Events.edit("e4", id: "r1", sender: "alice", at: 1100, mentions: ["carol"]),
                          Events.delete("e5", id: "r2", at: 1200)], client: client)
        #expect(try app.subscribed("carol", "m7", client: client) == true)
        let rows = try environment.connection().query("SELECT reply_count, last_reply_id FROM threads WHERE app = \(app.id) AND parent_id = 'm7'")
        #expect(try rows[0].decode(0, as: Int.self) == 1)
        #expect(try rows[0].decode(1, as: String.self) == "r1")
        // An edit without parentId that arrives before its message: its mentions follow the thread.
        try app.ingest([Events.edit("e6", id: "r3", sender: "alice", at: 1300, mentions: ["dave"]),
                          Events.member("j2", "member.joined", uid: "dave", at: 1)], client: client)
        try app.ingest([Events.message("e7", id: "r3", sender: "alice", parent: "m7", at: 1250)], client: client)
        #expect(try app.subscribed("dave", "m7", client: client) == true)
    }
}
