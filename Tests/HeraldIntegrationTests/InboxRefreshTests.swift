import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// A reply lists its thread as stale instead of rewriting every subscriber's sort key; the
/// inbox must be exact before the background refresh as after it (SPEC §6, docs/inbox.md).
@Suite("Inbox refresh", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct InboxRefreshTests {
    struct Row: Equatable, CustomStringConvertible {
        let thread: String
        let unread: Int
        let mentions: Int
        var description: String { "\(thread)(\(unread)/\(mentions))" }
    }

    func pages(_ app: TestApp, _ uid: String, limit: Int, client: HTTPClient) throws -> (rows: [Row], totals: [Int]) {
        var rows: [Row] = []
        var cursor: String?
        var totals: [Int] = []
        repeat {
            let response = try client.get("/v1/users/\(uid)/threads?limit=\(limit)" + (cursor.map { "&cursor=" + $0 } ?? ""),
                                          token: app.serverKey)
            #expect(response.status == 200)
            for row in response.json["data"] as? [[String: Any]] ?? [] {
                rows.append(Row(thread: row["parentMessageId"] as! String, unread: row["unreadReplyCount"] as! Int,
                                mentions: row["unreadMentionCount"] as! Int))
            }
            let total = response.json["totals"] as? [String: Any] ?? [:]
            totals = [total["unreadThreads"] as? Int ?? -1, total["unreadMentions"] as? Int ?? -1]
            cursor = (response.json["meta"] as? [String: Any])?["next"] as? String
        } while cursor != nil
        return (rows, totals)
    }

    @Test("pages, unread counts and totals are the same while sort keys wait for the refresh and after it")
    func exactWhileStale() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let refresher = environment.server.service.services.inboxRefresher
        let app = try environment.makeApp(prefix: "refresh")
        let base = nowMilliseconds() - 3_600_000
        var events: [[String: Any]] = ["alice", "bob", "carol", "dave"].enumerated().map {
            Events.member("join-\($0.element)", "member.joined", uid: $0.element, at: base - 10_000 + Int64($0.offset))
        }
        for thread in 0..<6 { events.append(Events.message("c-p\(thread)", id: "p\(thread)", sender: "alice", at: base + Int64(thread))) }
        #expect(try app.post(events, client: client).json["rejected"] as? Int == 0)
        // dave follows every thread by hand and never posts: only the background refresh moves
        // his rows' sort keys (alice, the author, is recomputed with every reply).
        for thread in 0..<6 {
            #expect(try client.send("PUT", "/v1/users/dave/threads/p\(thread)/subscription", token: app.serverKey,
                                    headers: ["Content-Type": "application/json"], body: Array("{}".utf8)).status == 200)
        }
        var expected: [String: (last: Int64, count: Int, mentions: Int)] = [:]
        var expectedDave: [String: (last: Int64, count: Int, mentions: Int)] = [:]
        for n in 0..<20 {
            let thread = "p\(n * 7 % 6)"
            let at = base + 1_000 + Int64(n) * 10
            let mentions = n % 4 == 0 ? ["alice"] : []
            #expect(try app.post([Events.message("c-r\(n)", id: "r\(n)", sender: n % 3 == 0 ? "carol" : "bob", parent: thread, at: at,
                                                 mentions: mentions, mentionsAll: n == 9)], client: client).status == 200)
            let old = expected[thread] ?? (0, 0, 0)
            expected[thread] = (at, old.count + 1, old.mentions + (mentions.isEmpty && n != 9 ? 0 : 1))
            let dave = expectedDave[thread] ?? (0, 0, 0)
            expectedDave[thread] = (at, dave.count + 1, dave.mentions + (n == 9 ? 1 : 0))
        }
        // Any instance's refresher may have run meanwhile (tests start servers of their own on
        // this database). Put the threads back where a refresh has not reached them: dave's sort
        // keys at the parents' times, the threads listed as stale, and their thread locks held
        // (session locks), which every refresher tries and skips.
        let holder = try environment.connection()
        defer { holder.close() }
        let threads = (0..<6).map { "p\($0)" }
        try holder.query("SELECT pg_advisory_lock(hashtextextended(\(app.id) || ':t:' || t, 0)) FROM unnest(\(threads)::text[]) AS t")
        try holder.query("""
            UPDATE subscriptions s SET activity_at = t.parent_sent_at FROM threads t
             WHERE s.app = \(app.id) AND s.uid = 'dave' AND t.app = s.app AND t.parent_id = s.thread_id
            """)
        try holder.query("INSERT INTO stale_threads (app, thread_id) SELECT \(app.id), unnest(\(threads)::text[]) ON CONFLICT DO NOTHING")
        func rows(_ expected: [String: (last: Int64, count: Int, mentions: Int)]) -> [Row] {
            expected.sorted { $0.value.last > $1.value.last }.map { Row(thread: $0.key, unread: $0.value.count, mentions: $0.value.mentions) }
        }
        let want = rows(expected), wantDave = rows(expectedDave)
        let before = try pages(app, "alice", limit: 2, client: client)
        #expect(before.rows == want)
        #expect(before.totals == [want.count, want.map(\.mentions).reduce(0, +)])
        let daveBefore = try pages(app, "dave", limit: 2, client: client)
        #expect(daveBefore.rows == wantDave)
        #expect(daveBefore.totals == [wantDave.count, wantDave.map(\.mentions).reduce(0, +)])
        // Unrefreshed, dave's stored sort keys are still the parents' times: the order comes from the threads.
        let stored = try environment.connection().query(
            "SELECT thread_id FROM subscriptions WHERE app = \(app.id) AND uid = 'dave' ORDER BY activity_at DESC, thread_id DESC")
        #expect(try stored.map { try $0.decode(0, as: String.self) } != wantDave.map(\.thread))
        _ = try refresher.runOnce(waiting: false)
        let held = try environment.connection().query("SELECT count(*) FROM stale_threads WHERE app = \(app.id)")[0]
            .decode(0, as: Int.self)
        #expect(held == 6, "no refresher takes a thread whose lock is held")
        try holder.query("SELECT pg_advisory_unlock_all()")
        // A round takes the oldest stale threads of every app (other suites' too, some of them
        // locked by their tests): rounds until this app's are done.
        let refreshed = try eventually(seconds: 15) {
            _ = try refresher.runOnce(waiting: false)
            return try environment.connection().query("SELECT count(*) FROM stale_threads WHERE app = \(app.id)")[0]
                .decode(0, as: Int.self) == 0
        }
        #expect(refreshed, "every stale thread of the app was refreshed once its locks were free")
        let after = try pages(app, "alice", limit: 2, client: client)
        #expect(after.rows == want)
        #expect(after.totals == before.totals)
        let daveAfter = try pages(app, "dave", limit: 2, client: client)
        #expect(daveAfter.rows == wantDave)
        #expect(daveAfter.totals == daveBefore.totals)
    }

    @Test("a thread's rows are refreshed a slice at a time; it stays stale until a pass ends on the thread it began with")
    func slices() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let app = try environment.makeApp(prefix: "refreshslice")
        let members = (1...7).map { "u\($0)" }
        #expect(try app.setMembers("g1", ["alice"] + members, client: client).status == 200)
        let base = nowMilliseconds() - 3_600_000
        try app.ingest([Events.message("p", id: "p", sender: "alice", at: base),
                        Events.message("q", id: "q", sender: "alice", at: base + 1)], client: client)
        for uid in members {
            #expect(try client.send("PUT", "/v1/users/\(uid)/threads/p/subscription", token: app.serverKey).status == 200)
            #expect(try client.send("PUT", "/v1/users/\(uid)/threads/q/subscription", token: app.serverKey).status == 200)
        }
        try app.ingest([Events.message("q1", id: "q1", sender: "alice", parent: "q", at: base + 10)], client: client)
        try app.ingest([Events.message("p1", id: "p1", sender: "alice", parent: "p", at: base + 20)], client: client)
        // Every refresher skips p while this session holds its lock; the slices below run here.
        let holder = try environment.connection()
        defer { holder.close() }
        try holder.query("SELECT pg_advisory_lock(hashtextextended(\(app.id) || ':t:p', 0))")
        func restale() throws {
            try holder.query("""
                UPDATE subscriptions s SET activity_at = t.parent_sent_at FROM threads t
                 WHERE s.app = \(app.id) AND s.thread_id = 'p' AND t.app = s.app AND t.parent_id = 'p' AND s.uid <> 'alice'
                """)
            try holder.query("""
                INSERT INTO stale_threads (app, thread_id) VALUES (\(app.id), 'p')
                ON CONFLICT (app, thread_id) DO UPDATE SET refresh_after = NULL, refresh_version = NULL
                """)
        }
        func slice() throws { try holder.query("SELECT herald_refresh_thread_rows(\(app.id), ARRAY['p'], 3)") }
        func current() throws -> Int {
            try holder.query("""
                SELECT count(*) FROM subscriptions s JOIN threads t ON t.app = s.app AND t.parent_id = s.thread_id
                 WHERE s.app = \(app.id) AND s.thread_id = 'p' AND s.activity_at = t.last_reply_at
                """)[0].decode(0, as: Int.self)
        }
        func stale() throws -> Bool {
            try holder.query("SELECT count(*) FROM stale_threads WHERE app = \(app.id) AND thread_id = 'p'")[0].decode(0, as: Int.self) == 1
        }
        // the inbox is exact whatever the pass has reached: p (the later reply) above q
        func inboxes() throws {
            for uid in members {
                let rows = try client.get("/v1/users/\(uid)/threads?limit=1", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
                #expect(rows.first?["parentMessageId"] as? String == "p", "\(uid): \(rows)")
            }
        }

        // 8 rows in uid order: alice (who replied: ingest keeps her row current), u1 … u7
        try restale()
        #expect(try current() == 1)
        try inboxes()
        try slice()
        #expect(try current() == 3 && stale(), "one slice: alice, u1, u2; the thread still stale")
        try inboxes()
        try slice()
        #expect(try current() == 6 && stale())
        try slice()
        #expect(try current() == 8 && !stale(), "the pass ended on the thread it began with")
        try inboxes()

        // a reply between two slices: the pass ends, and a new one begins
        try restale()
        try slice()
        try holder.query("SELECT pg_advisory_unlock_all()")
        try app.ingest([Events.message("p2", id: "p2", sender: "alice", parent: "p", at: base + 30)], client: client)
        try holder.query("SELECT pg_advisory_lock(hashtextextended(\(app.id) || ':t:p', 0))")
        try holder.query("""
            UPDATE subscriptions s SET activity_at = t.parent_sent_at FROM threads t
             WHERE s.app = \(app.id) AND s.thread_id = 'p' AND t.app = s.app AND t.parent_id = 'p' AND s.uid IN ('u1', 'u2', 'u3')
            """)
        try slice()
        try slice()
        #expect(try current() == 6 && stale(), "the thread changed during the pass (u1 and u2 were refreshed before p2): still stale")
        try inboxes()
        try slice()
        try slice()
        #expect(try current() == 8 && stale())
        try slice()
        #expect(try current() == 8 && !stale(), "a whole pass on the thread as it is now")
        try inboxes()
    }

    /// A refresh step holds the thread's lock, which replies to the thread wait for: a busy
    /// thread is left until it is quiet, or until it has waited the longest deferral.
    @Test("a round leaves a busy thread until it is quiet or has waited the longest deferral")
    func busyThreadsWait() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let refresher = environment.server.service.services.inboxRefresher
        let app = try environment.makeApp(prefix: "refreshbusy")
        #expect(try app.setMembers("g1", ["alice", "bob", "carol"], client: client).status == 200)
        let now = nowMilliseconds()
        try app.ingest([Events.message("p", id: "p", sender: "alice", at: now - 1000),
                        Events.message("p1", id: "p1", sender: "bob", parent: "p", at: now)], client: client)
        // Every refresher skips the thread while this session holds its lock; the thread is
        // listed as stale here, whatever a refresher did before the lock was taken.
        let holder = try environment.connection()
        defer { holder.close() }
        try holder.query("SELECT pg_advisory_lock(hashtextextended(\(app.id) || ':t:p', 0))")
        // (two statements: Citus takes no function but an immutable one in an upsert's update)
        try holder.query("INSERT INTO stale_threads (app, thread_id) VALUES (\(app.id), 'p') ON CONFLICT DO NOTHING")
        try holder.query("""
            UPDATE stale_threads SET since = herald_now_ms(), refresh_after = NULL, refresh_version = NULL
             WHERE app = \(app.id) AND thread_id = 'p'
            """)
        func set(_ assignments: SQL, on table: String) throws {
            let key = SQL(unsafeRaw: table == "threads" ? "threads SET " : "stale_threads SET ")
            let column = SQL(unsafeRaw: table == "threads" ? " AND parent_id = 'p'" : " AND thread_id = 'p'")
            try holder.query("UPDATE " + key + assignments + " WHERE app = \(app.id)" + column)
        }
        func due(waiting: Bool = true) throws -> (due: Bool, deferred: Bool) {
            let found = try refresher.due(waiting: waiting, app: app.id)
            return (found.threads[app.id]?.contains { $0.thread == "p" } ?? false, found.deferred)
        }
        try set("updated_at = herald_now_ms()", on: "threads")
        #expect(try due() == (false, true), "just replied to: busy, left for later")
        #expect(try due(waiting: false).due)
        try set("updated_at = herald_now_ms() - \(refresher.quietMilliseconds + 100)", on: "threads")
        #expect(try due() == (true, false), "quiet for longer than quietMilliseconds")
        try set("updated_at = herald_now_ms()", on: "threads")
        try set("since = herald_now_ms() - \(refresher.deferMilliseconds + 100)", on: "stale_threads")
        #expect(try due() == (true, false), "busy, but stale for longer than deferMilliseconds")
        // a refresh step (one row of the three: the pass goes on) starts the wait again
        try holder.query("SELECT herald_refresh_thread_rows(\(app.id), ARRAY['p'], 1)")
        #expect(try holder.query("SELECT count(*) FROM stale_threads WHERE app = \(app.id) AND thread_id = 'p'")[0].decode(0, as: Int.self) == 1)
        #expect(try due() == (false, true), "a step was just taken and the thread is busy")
    }
}
