import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §6 through HTTP against PostgreSQL.
@Suite("Thread inbox", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct InboxTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func app(members: [String] = ["alice", "bob", "carol", "dave"]) throws -> TestApp {
        let app = try environment.makeApp(prefix: "inbox")
        let joins = members.enumerated().map { Events.member("join-\($0.element)", "member.joined", uid: $0.element, at: past - 100_000 + Int64($0.offset)) }
        #expect(try app.post(joins, client: client).json["accepted"] as? Int == members.count)
        return app
    }

    func inbox(_ app: TestApp, _ uid: String, _ query: String = "") throws -> HTTPResult {
        try client.get("/v1/users/\(uid)/threads" + (query.isEmpty ? "" : "?" + query), token: app.serverKey)
    }

    func rows(_ response: HTTPResult) -> [[String: Any]] { response.json["data"] as? [[String: Any]] ?? [] }

    func row(_ app: TestApp, _ uid: String, _ thread: String) throws -> [String: Any]? {
        rows(try inbox(app, uid, "limit=1000")).first { $0["parentMessageId"] as? String == thread }
    }

    func unread(_ app: TestApp, _ uid: String, _ thread: String) throws -> (Int, Int)? {
        guard let row = try row(app, uid, thread) else { return nil }
        return (row["unreadReplyCount"] as? Int ?? -1, row["unreadMentionCount"] as? Int ?? -1)
    }

    func totals(_ app: TestApp, _ uid: String) throws -> (Int, Int) {
        let response = try inbox(app, uid, "limit=1")
        let totals = response.json["totals"] as? [String: Any] ?? [:]
        return (totals["unreadThreads"] as? Int ?? -1, totals["unreadMentions"] as? Int ?? -1)
    }

    /// Every page of an inbox, following `next`.
    func allPages(_ app: TestApp, _ uid: String, limit: Int, extra: String = "") throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            var query = "limit=\(limit)" + extra
            if let cursor { query += "&cursor=\(cursor)" }
            let page = try inbox(app, uid, query)
            #expect(page.status == 200)
            let data = rows(page)
            let meta = page.json["meta"] as? [String: Any] ?? [:]
            cursor = meta["next"] as? String
            #expect((meta["hasMore"] as? Bool ?? false) == (cursor != nil))
            if cursor != nil { #expect(data.count == limit, "a page before the last is full") }
            ids += data.compactMap { $0["parentMessageId"] as? String }
            pages += 1
        } while cursor != nil && pages < 10_000
        return ids
    }

    @Test("a row has every field of SPEC §6; one-on-one rows name the other user")
    func rowShape() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past, text: "plan?"),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10, text: "yes", mentions: ["carol"]),
                          Events.message("e3", id: "d1", sender: "alice", peer: "bob", at: past + 20, text: "dm"),
                          Events.message("e4", id: "d2", sender: "bob", peer: "alice", parent: "d1", at: past + 30, text: "dm reply")],
                         client: client)
        let response = try inbox(app, "bob")
        #expect(response.status == 200)
        let data = rows(response)
        #expect(data.map { $0["parentMessageId"] as? String } == ["d1", "m7"], "latest activity first")
        let m7 = try #require(data.last)
        #expect(m7["conversationId"] as? String == "group_g1")
        #expect(m7["receiverType"] as? String == "group")
        #expect(m7["receiver"] as? String == "g1")
        let parent = try #require(m7["parent"] as? [String: Any])
        #expect(parent["id"] as? String == "m7")
        #expect(parent["sender"] as? String == "bob")
        #expect(parent["sentAt"] as? Int64 == past)
        #expect(parent["text"] as? String == "plan?")
        #expect(m7["replyCount"] as? Int == 1)
        let last = try #require(m7["lastReply"] as? [String: Any])
        #expect(last["id"] as? String == "r1")
        #expect(last["sender"] as? String == "alice")
        #expect(last["sentAt"] as? Int64 == past + 10)
        #expect(last["text"] as? String == "yes")
        #expect(m7["unreadReplyCount"] as? Int == 1)
        #expect(m7["unreadMentionCount"] as? Int == 0)
        #expect(m7["subscribed"] as? Bool == true)
        let subscription = try #require(m7["subscription"] as? [String: Any])
        #expect(subscription["source"] as? String == "auto")
        #expect(subscription["reason"] as? String == "started")
        #expect(subscription["since"] as? Int64 == past)
        #expect(m7["updatedAt"] is Int)
        let d1 = try #require(data.first)
        #expect(d1["receiverType"] as? String == "user")
        #expect(d1["receiver"] as? String == "alice", "the other user, seen from bob")
        #expect(d1["conversationId"] as? String == "alice_user_bob")
        #expect(try row(app, "alice", "d1")?["receiver"] as? String == "bob")
        let meta = try #require(response.json["meta"] as? [String: Any])
        #expect(meta["hasMore"] as? Bool == false)
        #expect(meta["next"] is NSNull)
    }

    @Test("threads without replies are not listed unless subscribed explicitly")
    func repliesOrExplicit() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past)], client: client)
        #expect(rows(try inbox(app, "bob")).isEmpty)
        #expect(try client.send("PUT", "/v1/users/carol/threads/m7/subscription", token: app.serverKey).status == 200)
        let carol = rows(try inbox(app, "carol"))
        #expect(carol.count == 1)
        #expect(carol.first?["lastReply"] is NSNull)
        #expect((carol.first?["subscription"] as? [String: Any])?["source"] as? String == "manual")
    }

    @Test("2,500 threads with the same activity time page exactly once each, at limit 7 and at limit 1000")
    func tiesPaging() throws {
        let app = try app()
        let at = past + 500
        var events: [[String: Any]] = []
        for index in 0..<2500 {
            let id = "t\(String(index, radix: 36))-\(index % 7)"
            events.append(Events.message("p\(index)", id: id, sender: "bob", at: past))
            events.append(Events.message("r\(index)", id: "r\(index)", sender: "alice", parent: id, at: at))
        }
        for start in stride(from: 0, to: events.count, by: 1000) {
            let response = try app.post(Array(events[start..<min(events.count, start + 1000)]), client: client)
            #expect(response.json["accepted"] as? Int == min(1000, events.count - start))
        }
        let expected = (0..<2500).map { "t\(String($0, radix: 36))-\($0 % 7)" }
            .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }.reversed()
        for limit in [7, 1000] {
            let ids = try allPages(app, "alice", limit: limit)
            #expect(ids.count == 2500, "limit \(limit)")
            #expect(Set(ids).count == 2500, "no thread twice at limit \(limit)")
            #expect(ids == Array(expected), "ties broken by parentMessageId descending in byte order")
        }
    }

    @Test("new activity between pages: a thread that moves to the top never appears twice after the cursor")
    func activityWhilePaging() throws {
        let app = try app()
        var events: [[String: Any]] = []
        for index in 0..<30 {
            events.append(Events.message("p\(index)", id: "t\(index)", sender: "bob", at: past))
            events.append(Events.message("r\(index)", id: "r\(index)", sender: "alice", parent: "t\(index)", at: past + 100 + Int64(index)))
        }
        try app.ingest(events, client: client)
        let first = try inbox(app, "alice", "limit=10")
        var seen = rows(first).compactMap { $0["parentMessageId"] as? String }
        var cursor = (first.json["meta"] as? [String: Any])?["next"] as? String
        // t5 (on a later page) and t25 (already seen) get new replies.
        try app.ingest([Events.message("n1", id: "x1", sender: "carol", parent: "t5", at: past + 1000),
                          Events.message("n2", id: "x2", sender: "carol", parent: "t25", at: past + 1001)], client: client)
        while let next = cursor {
            let page = try inbox(app, "alice", "limit=10&cursor=\(next)")
            seen += rows(page).compactMap { $0["parentMessageId"] as? String }
            cursor = (page.json["meta"] as? [String: Any])?["next"] as? String
        }
        #expect(Set(seen).count == seen.count, "nothing twice after the cursor")
        #expect(!seen.contains("t5") || seen.firstIndex(of: "t5")! < 10, "t5 moved above the cursor")
        #expect(seen.count == 29, "every thread but the one that moved above the cursor")
        let top = rows(try inbox(app, "alice", "limit=2")).compactMap { $0["parentMessageId"] as? String }
        #expect(top == ["t25", "t5"], "a new first page shows them on top")
    }

    @Test("unread counts through replies, own replies, mentions, @all, deletions, reads and mark-all; totals match")
    func unreadSequence() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1)], client: client)
        #expect(try unread(app, "bob", "m7")! == (1, 0), "the starter has every reply unread")
        #expect(try unread(app, "alice", "m7")! == (0, 0), "own reply: read up to it")
        try app.ingest([Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: past + 2, mentions: ["bob"]),
                          Events.message("e4", id: "r3", sender: "carol", parent: "m7", at: past + 3, mentionsAll: true),
                          Events.message("e5", id: "r4", sender: "carol", parent: "m7", at: past + 4)], client: client)
        #expect(try unread(app, "bob", "m7")! == (4, 2))
        #expect(try unread(app, "alice", "m7")! == (3, 1), "@all counts as a mention")
        #expect(try unread(app, "carol", "m7")! == (0, 0))
        #expect(try totals(app, "bob") == (1, 2))
        // A mentioned user starts with the mentioning reply and later ones unread.
        try app.ingest([Events.message("e6", id: "r5", sender: "carol", parent: "m7", at: past + 5, mentions: ["dave"]),
                          Events.message("e7", id: "r6", sender: "bob", parent: "m7", at: past + 6)], client: client)
        #expect(try unread(app, "dave", "m7")! == (2, 1))
        #expect(try unread(app, "bob", "m7")! == (0, 0), "bob's own reply moved his read position")
        // Deleting an unread reply lowers the counts and moves lastReply back.
        try app.ingest([Events.delete("e8", id: "r6", parent: "m7", at: past + 7),
                          Events.delete("e9", id: "r5", parent: "m7", at: past + 8)], client: client)
        #expect(try unread(app, "dave", "m7")! == (0, 0))
        #expect(try unread(app, "alice", "m7")! == (3, 1))
        let m7 = try #require(try row(app, "alice", "m7"))
        #expect(m7["replyCount"] as? Int == 4)
        #expect((m7["lastReply"] as? [String: Any])?["id"] as? String == "r4")
        // Read up to r3, then everything; the position never moves back.
        let read = try client.post("/v1/users/alice/threads/m7/read", token: app.serverKey, json: #"{"messageId": "r3"}"#)
        #expect(read.status == 200)
        #expect(read.json["unreadReplyCount"] as? Int == 1)
        #expect(read.json["unreadMentionCount"] as? Int == 0)
        let back = try client.post("/v1/users/alice/threads/m7/read", token: app.serverKey, json: #"{"messageId": "r2"}"#)
        #expect(back.json["unreadReplyCount"] as? Int == 1, "a read position only moves forward")
        let all = try client.post("/v1/users/alice/threads/m7/read", token: app.serverKey, json: "{}")
        #expect(all.json["unreadReplyCount"] as? Int == 0)
        // A late reply older than the read position stays read.
        try app.ingest([Events.message("e10", id: "r0", sender: "carol", parent: "m7", at: past + 1)], client: client)
        #expect(try unread(app, "alice", "m7")! == (0, 0))
        // Mark-all for one conversation.
        try app.ingest([Events.message("e11", id: "m8", sender: "carol", at: past + 20),
                          Events.message("e12", id: "r7", sender: "bob", parent: "m8", at: past + 21, mentions: ["alice"]),
                          Events.message("e13", id: "r8", sender: "bob", parent: "m7", at: past + 22)], client: client)
        #expect(try totals(app, "alice") == (2, 1))
        let marked = try client.post("/v1/users/alice/threads/read?guid=g1", token: app.serverKey, json: "{}")
        #expect(marked.json["updated"] as? Int == 2)
        #expect(try totals(app, "alice") == (0, 0))
        #expect(try unread(app, "alice", "m8")! == (0, 0))
    }

    /// The subscription and inbox columns of every row of the app, as text, by (uid, thread).
    func snapshot(_ app: TestApp) throws -> [String: String] {
        var rows: [String: String] = [:]
        for row in try environment.connection().query("""
            SELECT uid || '@' || thread_id,
                   ROW(subscribed, reason, since, read_at, read_id, read_count, has_unread, unread_mentions, visible)::text
              FROM subscriptions WHERE app = \(app.id)
            """) {
            rows[try row.decode(0)] = try row.decode(1)
        }
        return rows
    }

    @Test("in-order replies take the incremental path, and it leaves every row as a recompute from the facts would")
    func incrementalAgreesWithRecompute() throws {
        let members = ["alice", "bob", "carol", "dave", "erin", "frank"]
        let app = try app(members: members)
        var random = OrderIndependenceTests.Random(state: 11)
        try app.ingest([Events.message("p1", id: "t1", sender: "alice", at: past),
                          Events.message("p2", id: "t2", sender: "bob", at: past + 1)], client: client)
        // Subscribed before the replies: explicitly, so that later triggers change no subscription.
        for uid in members.dropLast() {
            for thread in ["t1", "t2"] {
                #expect(try client.send("PUT", "/v1/users/\(uid)/threads/\(thread)/subscription", token: app.serverKey).status == 200)
            }
        }
        var at = past + 1000
        var pending: [[String: Any]] = []
        for index in 0..<80 {
            at += 10
            let sender = members[Int(random.next() % UInt64(members.count))]
            let thread = random.next() % 3 == 0 ? "t2" : "t1"
            let mentioned = random.next() % 3 == 0 ? [members[Int(random.next() % UInt64(members.count))]] : []
            // now and then a reply older than the thread's newest (the full path)
            let time = random.next() % 10 == 0 ? at - 35 : at
            pending.append(Events.message("r\(index)", id: "r\(index)", sender: sender, parent: thread, at: time,
                                          mentions: mentioned, mentionsAll: random.next() % 15 == 0))
            if random.next() % 3 != 0 {   // mostly one per request, sometimes a few together
                try app.ingest(pending, client: client)
                pending = []
            }
            if random.next() % 8 == 0 {
                let reader = members[Int(random.next() % UInt64(members.count))]
                _ = try client.post("/v1/users/\(reader)/threads/\(thread)/read", token: app.serverKey, json: "{}")
            }
        }
        if !pending.isEmpty { try app.ingest(pending, client: client) }
        // A sender's deleted later reply is still their read position: their late reply is not.
        at += 1000
        try app.ingest([Events.message("p3", id: "t3", sender: "alice", at: at)], client: client)
        try app.ingest([Events.message("d1", id: "d1", sender: "bob", parent: "t3", at: at + 20, mentions: ["erin"])], client: client)
        try app.ingest([Events.message("d2", id: "d2", sender: "erin", parent: "t3", at: at + 100)], client: client)
        try app.ingest([Events.delete("d3", id: "d2", parent: "t3", at: at + 110)], client: client)
        try app.ingest([Events.message("d4", id: "d4", sender: "erin", parent: "t3", at: at + 50)], client: client)
        try app.ingest([Events.message("d5", id: "d5", sender: "bob", parent: "t3", at: at + 70)], client: client)
        let incremental = try snapshot(app)
        #expect(incremental.count >= 10)
        let unread = try environment.connection().query(
            "SELECT count(*) FILTER (WHERE has_unread), count(*) FILTER (WHERE unread_mentions > 0) FROM subscriptions WHERE app = \(app.id)")[0]
        #expect(try unread.decode(0, as: Int.self) > 0 && unread.decode(1, as: Int.self) > 0, "some rows are unread, some with mentions")

        // Every row recomputed from the facts, as for a key of a batch that needs it.
        // (the keys first, then the calls: on Citus a function called from a query over the app's
        // rows would run inside it, on the worker)
        let keys = try environment.connection().query("SELECT uid, thread_id FROM subscriptions WHERE app = \(app.id)")
        let uids = try keys.map { try $0.decode("uid", as: String.self) }, threads = try keys.map { try $0.decode("thread_id", as: String.self) }
        try environment.connection().query("""
            SELECT herald_recompute_subscriptions(\(app.id), \(uids)::text[], \(threads)::text[]),
                   herald_refresh_inbox(\(app.id), \(uids)::text[], \(threads)::text[])
            """)
        let recomputed = try snapshot(app)
        for key in Set(incremental.keys).union(recomputed.keys).sorted() where incremental[key] != recomputed[key] {
            Issue.record("\(key): incremental \(incremental[key] ?? "no row"), recomputed \(recomputed[key] ?? "no row")")
        }
    }

    @Test("unsubscribe hides a thread; a resubscription by mention starts at the mention; explicit subscribe marks read")
    func resubscribe() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1),
                          Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: past + 2)], client: client)
        #expect(try unread(app, "alice", "m7")! == (1, 0))
        _ = try client.delete("/v1/users/alice/threads/m7/subscription", token: app.serverKey)
        #expect(try row(app, "alice", "m7") == nil)
        #expect(try totals(app, "alice") == (0, 0))
        let now = nowMilliseconds()
        try app.ingest([Events.message("e4", id: "r3", sender: "carol", parent: "m7", at: now + 10),
                          Events.message("e5", id: "r4", sender: "carol", parent: "m7", at: now + 20, mentions: ["alice"]),
                          Events.message("e6", id: "r5", sender: "carol", parent: "m7", at: now + 30)], client: client)
        #expect(try unread(app, "alice", "m7")! == (2, 1), "from the mentioning reply on")
        _ = try client.delete("/v1/users/bob/threads/m7/subscription", token: app.serverKey)
        let put = try client.send("PUT", "/v1/users/bob/threads/m7/subscription", token: app.serverKey)
        #expect(put.status == 200)
        #expect(try unread(app, "bob", "m7")! == (0, 0), "explicit subscribe marks everything read")
    }

    @Test("filters, unreadOnly, limits and errors")
    func filtersAndErrors() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1),
                          Events.message("e3", id: "g2m", sender: "bob", group: "g2", at: past + 2),
                          Events.message("e4", id: "g2r", sender: "alice", group: "g2", parent: "g2m", at: past + 3),
                          Events.message("e5", id: "d1", sender: "bob", peer: "alice", at: past + 4),
                          Events.message("e6", id: "d2", sender: "alice", peer: "bob", parent: "d1", at: past + 5)], client: client)
        #expect(rows(try inbox(app, "bob")).count == 3)
        #expect(rows(try inbox(app, "bob", "guid=g1")).compactMap { $0["parentMessageId"] as? String } == ["m7"])
        #expect(rows(try inbox(app, "bob", "uid=alice")).compactMap { $0["parentMessageId"] as? String } == ["d1"])
        #expect(rows(try inbox(app, "bob", "unreadOnly=true")).count == 3)
        _ = try client.post("/v1/users/bob/threads/m7/read", token: app.serverKey, json: "{}")
        #expect(rows(try inbox(app, "bob", "unreadOnly=true")).compactMap { $0["parentMessageId"] as? String } == ["d1", "g2m"])
        #expect(try totals(app, "bob") == (2, 0), "totals cover the whole inbox whatever the filter")
        let filteredTotals = try inbox(app, "bob", "guid=g1&unreadOnly=true").json["totals"] as? [String: Any]
        #expect(filteredTotals?["unreadThreads"] as? Int == 2)

        let both = try inbox(app, "bob", "guid=g1&uid=alice")
        #expect(both.status == 400)
        #expect(both.errorCode == "ERR_INVALID_FILTER")
        for limit in ["0", "1001", "x"] {
            let response = try inbox(app, "bob", "limit=\(limit)")
            #expect(response.status == 400)
            #expect(response.errorCode == "ERR_INVALID_LIMIT")
        }
        #expect(try inbox(app, "bob", "unreadOnly=yes").status == 400)
        // Cursors: altered, or from another user's or filter's list, are refused.
        let page = try inbox(app, "bob", "limit=1")
        let cursor = try #require((page.json["meta"] as? [String: Any])?["next"] as? String)
        #expect(try inbox(app, "bob", "limit=1&cursor=\(cursor)").status == 200)
        for (uid, query) in [("alice", "limit=1&cursor=\(cursor)"), ("bob", "limit=1&guid=g1&cursor=\(cursor)"),
                             ("bob", "limit=1&cursor=\(String(cursor.dropLast(2)))xx"), ("bob", "limit=1&cursor=garbage")] {
            let refused = try inbox(app, uid, query)
            #expect(refused.status == 400, "\(uid) \(query)")
            #expect(refused.errorCode == "ERR_BAD_REQUEST")
            #expect(refused.errorParams["field"] as? String == "cursor")
        }
        #expect(try client.get("/v1/users/bob/threads", token: app.ingestKey).status == 403)
        // Read errors.
        #expect(try client.post("/v1/users/bob/threads/nope/read", token: app.serverKey, json: "{}").status == 404)
        #expect(try client.post("/v1/users/mallory/threads/m7/read", token: app.serverKey, json: "{}").status == 403)
        let wrongReply = try client.post("/v1/users/bob/threads/m7/read", token: app.serverKey, json: #"{"messageId": "g2r"}"#)
        #expect(wrongReply.status == 404)
        #expect(wrongReply.errorParams["field"] as? String == "messageId")
    }

    @Test("a group the user left disappears from the inbox and comes back on rejoin; deleted parents disappear")
    func accessAndDeletion() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1),
                          Events.message("e3", id: "m8", sender: "bob", at: past + 2),
                          Events.message("e4", id: "r2", sender: "alice", parent: "m8", at: past + 3),
                          Events.message("e5", id: "r3", sender: "carol", parent: "m8", at: past + 4)], client: client)
        #expect(rows(try inbox(app, "alice")).count == 2)
        #expect(try totals(app, "alice") == (1, 0))
        try app.ingest([Events.member("l1", "member.kicked", uid: "alice", at: past + 10)], client: client)
        #expect(rows(try inbox(app, "alice")).isEmpty)
        #expect(try totals(app, "alice") == (0, 0))
        try app.ingest([Events.member("j1", "member.added", uid: "alice", at: past + 20)], client: client)
        #expect(rows(try inbox(app, "alice")).count == 2)
        #expect(try unread(app, "alice", "m8")! == (1, 0), "counts were kept")
        try app.ingest([Events.delete("d1", id: "m8", at: past + 30)], client: client)
        #expect(rows(try inbox(app, "alice")).compactMap { $0["parentMessageId"] as? String } == ["m7"])
        #expect(try totals(app, "alice") == (0, 0))
    }

    @Test("a mention added by an edit leaves the mentioning reply unread")
    func mentionByEdit() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1),
                          Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: past + 2)], client: client)
        try app.ingest([Events.edit("e4", id: "r1", sender: "alice", parent: "m7", at: past + 100, mentions: ["dave"])], client: client)
        #expect(try unread(app, "dave", "m7")! == (2, 1), "r1 (mentioning dave) and r2 are unread")
    }
}
