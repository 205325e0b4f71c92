import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// Issue 12, item 10 (SPEC §1: threads do not nest): a reply whose parent is itself a reply
/// belongs to the root's thread, whatever order the events arrive in, and whatever was filed
/// under the middle reply's id before it was known to be a reply moves with it.
@Suite("Nested replies", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct NestedReplyTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// A new app whose group g1 has `members` since before `base` (a minute ago).
    func groupApp(_ members: [String]) throws -> (TestApp, Int64) {
        let app = try environment.makeApp(prefix: "nested")
        let base = nowMilliseconds() - 60_000
        try app.ingest(members.enumerated().map {
            Events.member("join-\($0.element)", "member.joined", uid: $0.element, at: base - 10_000 + Int64($0.offset))
        }, client: client)
        return (app, base)
    }

    /// What one delivery order leaves: the stored thread of each reply, thread rows, subscription
    /// rows by thread, jobs, and alice's inbox row of the root.
    struct Outcome: Equatable, CustomStringConvertible {
        var parents: [String: String] = [:]
        var threadRows: [String] = []
        var subscriptions: [String] = []
        var jobs: [String] = []
        var inbox: [String] = []
        var description: String {
            "parents \(parents.sorted { $0.key < $1.key }) threads \(threadRows) subscriptions \(subscriptions) jobs \(jobs) inbox \(inbox)"
        }
    }

    func run(order: [[Int]]) throws -> Outcome {
        let (app, base) = try groupApp(["alice", "bob", "carol", "dave"])
        // alice hears only of replies in threads she is subscribed to (hers, p): a reply filed in
        // another thread would make no job for her.
        let preference = try client.send("PATCH", "/v1/users/alice/preferences", token: app.serverKey,
                                         headers: ["Content-Type": "application/json"],
                                         body: Array(#"{"groupPreferences": {"replies": "SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}"#.utf8))
        #expect(preference.status == 200)
        let events: [[String: Any]] = [
            Events.message("e-p", id: "p", sender: "alice", at: base, text: "root"),
            Events.message("e-r1", id: "r1", sender: "bob", parent: "p", parentSender: "alice", at: base + 1_000, text: "first"),
            // a reply to the reply: its bus names r1 (and r1's author) as the parent
            Events.message("e-r2", id: "r2", sender: "carol", parent: "r1", parentSender: "bob", at: base + 2_000,
                           text: "second", mentions: ["dave"]),
            Events.message("e-r3", id: "r3", sender: "dave", parent: "r2", parentSender: "carol", at: base + 3_000, text: "third"),
        ]
        for batch in order {
            let response = try app.post(batch.map { events[$0] }, client: client)
            #expect(response.status == 200, "\(response.text)")
        }
        var outcome = Outcome()
        let db = try environment.connection()
        for row in try db.query("SELECT id, parent_id FROM messages WHERE app = \(app.id) AND parent_id IS NOT NULL") {
            outcome.parents[try row.decode(0, as: String.self)] = try row.decode(1, as: String.self)
        }
        outcome.threadRows = try db.query("SELECT parent_id || ':' || reply_count FROM threads WHERE app = \(app.id) ORDER BY 1").map { try $0.decode(0, as: String.self) }
        outcome.subscriptions = try db.query("""
            SELECT thread_id || ':' || uid || ':' || subscribed || ':' || coalesce(reason, '-') FROM subscriptions
             WHERE app = \(app.id) ORDER BY 1
            """).map { try $0.decode(0, as: String.self) }
        outcome.jobs = try db.query("SELECT message_id || '→' || recipient FROM jobs WHERE app = \(app.id) ORDER BY 1").map { try $0.decode(0, as: String.self) }
        let inbox = try client.get("/v1/users/alice/threads", token: app.serverKey)
        outcome.inbox = (inbox.json["data"] as? [[String: Any]] ?? []).map {
            "\($0["parentMessageId"] ?? "?"):\($0["replyCount"] ?? "?"):\($0["unreadReplyCount"] ?? "?")"
        }

        // The user routes name the thread by any of its messages, and reach the root's row.
        let unsubscribe = try client.delete("/v1/users/carol/threads/r2/subscription", token: app.serverKey)
        #expect(unsubscribe.status == 200, "\(unsubscribe.text)")
        #expect(try app.subscribed("carol", "p", client: client) == false, "carol left the root's thread through r2")
        return outcome
    }

    @Test("a reply to a reply is in the root's thread, in order, reversed, in one batch, or with the middle reply last")
    func nestedReplies() throws {
        let inOrder = try run(order: [[0], [1], [2], [3]])
        #expect(inOrder.parents == ["r1": "p", "r2": "p", "r3": "p"])
        #expect(inOrder.threadRows == ["p:3"])
        #expect(!inOrder.subscriptions.contains { !$0.hasPrefix("p:") }, "\(inOrder.subscriptions)")
        #expect(inOrder.subscriptions.contains("p:dave:true:mention"))
        #expect(inOrder.inbox == ["p:3:3"])
        #expect(inOrder.jobs.contains("r2→alice") && inOrder.jobs.contains("r3→alice"), "the root's author hears of every reply")
        for order in [[[3], [2], [1], [0]], [[2, 0, 3, 1]], [[2], [3], [0], [1]], [[0], [2, 3], [1]]] {
            let outcome = try run(order: order)
            #expect(outcome == inOrder, "order \(order): \(outcome) vs in order \(inOrder)")
        }
    }

    @Test("an unsubscribe and a read made while the middle reply was unknown move with it to the root")
    func actionsMove() throws {
        let (app, base) = try groupApp(["alice", "bob", "carol", "dave"])
        // r2 names r1, not yet seen: filed under r1 for now
        #expect(try app.post([Events.message("e-r2", id: "r2", sender: "carol", parent: "r1", at: base + 2_000, mentions: ["dave"])],
                             client: client).status == 200)
        #expect(try client.delete("/v1/users/carol/threads/r2/subscription", token: app.serverKey).status == 200)
        let read = try client.send("POST", "/v1/users/dave/threads/r2/read", token: app.serverKey,
                                   headers: ["Content-Type": "application/json"], body: Array(#"{"messageId":"r2"}"#.utf8))
        // The answer is dave's inbox row of the thread r2 is filed in for now, read.
        #expect(read.status == 200 && read.json["parentMessageId"] as? String == "r1" && read.json["unreadReplyCount"] as? Int == 0,
                "\(read.status) \(read.text)")
        // then the root and the middle reply, with earlier times
        #expect(try app.post([Events.message("e-p", id: "p", sender: "alice", at: base),
                              Events.message("e-r1", id: "r1", sender: "bob", parent: "p", parentSender: "alice", at: base + 1_000)],
                             client: client).status == 200)
        let db = try environment.connection()
        #expect(try db.query("SELECT count(*) FROM subscriptions WHERE app = \(app.id) AND thread_id <> 'p'")[0]
                    .decode(0, as: Int64.self) == 0)
        #expect(try app.subscribed("carol", "p", client: client) == false, "the newer unsubscribe stands against her older reply")
        #expect(try app.subscribed("bob", "p", client: client) == true)
        #expect(try app.subscribed("dave", "p", client: client) == true)
        let row = (try client.get("/v1/users/dave/threads", token: app.serverKey).json["data"] as? [[String: Any]] ?? []).first
        #expect(row?["parentMessageId"] as? String == "p")
        #expect(row?["replyCount"] as? Int == 2)
        // dave read up to r2 (the newest reply): his read position moved with his row
        #expect(row?["unreadReplyCount"] as? Int == 0, "\(String(describing: row))")
    }

    @Test("a placeholder left under a reply's id (an edit that came first) does not keep a later reply out of the root's thread")
    func placeholderChain() throws {
        let (app, base) = try groupApp(["alice", "bob"])
        try app.ingest([Events.message("e-p", id: "p", sender: "alice", at: base)], client: client)
        // an edit of c naming b, before b or c is known: a placeholder c under b
        try app.ingest([Events.edit("e-c-edit", id: "c", sender: "bob", parent: "b", at: base + 5_000, mentions: nil, text: "edited")],
                       client: client)
        try app.ingest([Events.message("e-b", id: "b", sender: "bob", parent: "p", parentSender: "alice", at: base + 1_000)],
                       client: client)
        try app.ingest([Events.message("e-d", id: "d", sender: "alice", parent: "c", at: base + 3_000)], client: client)
        try app.ingest([Events.message("e-c", id: "c", sender: "bob", parent: "b", at: base + 2_000)], client: client)
        let db = try environment.connection()
        var parents: [String: String] = [:]
        for row in try db.query("SELECT id, parent_id FROM messages WHERE app = \(app.id) AND created_seen AND parent_id IS NOT NULL") {
            parents[try row.decode("id", as: String.self)] = try row.decode("parent_id", as: String.self)
        }
        #expect(parents == ["b": "p", "c": "p", "d": "p"])
        #expect(try db.query("SELECT parent_id || ':' || reply_count FROM threads WHERE app = \(app.id) ORDER BY 1")
                    .map { try $0.decode(0, as: String.self) } == ["p:3"])
    }
}
