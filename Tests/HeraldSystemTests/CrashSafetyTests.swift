import Foundation
import Glibc
import Postgres
import Synchronization
@testable import HeraldTestSupport
import Testing

@Suite("Crash safety", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct CrashSafetyTests {
    @Test("SIGKILL in the middle of a stream of batches, restart, redeliver everything: nothing applied twice, nothing lost")
    func killAndRedeliver() throws {
        let environment = try TestEnvironment.shared()
        // A database of its own: the killed instance delivers for every app of its database, and
        // would leave other suites' jobs leased until their leases end.
        try environment.withDatabaseOfItsOwn(prefix: "crash") { databaseURL in
        let first = try ServerProcess(databaseURL: databaseURL)
        let app = try environment.makeApp(prefix: "crash", client: first.client)
        let base = nowMilliseconds() - 1_000_000
        let users = (0..<20).map { "user\($0)" }
        // 60 batches of 50 replies in 10 threads.
        var batches: [[[String: Any]]] = []
        var parents: [[String: Any]] = []
        for thread in 0..<10 {
            parents.append(Events.message("parent-\(thread)", id: "t\(thread)", sender: users[thread], at: base + Int64(thread)))
        }
        var expectedReplies: [String: Int] = [:]
        var sequence = 0
        for _ in 0..<60 {
            var batch: [[String: Any]] = []
            for _ in 0..<50 {
                sequence += 1
                let thread = "t\(sequence % 10)"
                expectedReplies[thread, default: 0] += 1
                batch.append(Events.message("reply-\(sequence)", id: "r\(sequence)", sender: users[sequence % 20], parent: thread,
                                            at: base + 1000 + Int64(sequence), mentions: [users[(sequence * 7) % 20]]))
            }
            batches.append(batch)
        }
        let total = parents.count + 60 * 50

        let firstApp = app
        #expect(try firstApp.post(parents, client: first.client).json["accepted"] as? Int == parents.count)
        let acknowledged = Mutex<[Int]>([])
        let bodies = batches.map { Events.json($0) }
        let poster = Thread.detachNewThreadResult { () -> Int in
            let client = first.client
            for (index, body) in bodies.enumerated() {
                guard let response = try? client.post("/v1/events", token: firstApp.ingestKey, json: body),
                      response.status == 200 else { return index }
                acknowledged.withLock { $0.append(index) }
            }
            return bodies.count
        }
        #expect(eventually(seconds: 60) { acknowledged.withLock { $0.count } >= 15 })
        first.signal(SIGKILL)
        _ = first.wait()
        let stoppedAt = try #require(poster.wait(seconds: 30))
        let acked = acknowledged.withLock { $0 }
        #expect(acked == Array(0..<stoppedAt), "batches were acknowledged in order until the kill")
        #expect(stoppedAt < batches.count, "the kill happened mid-stream")

        let second = try ServerProcess(databaseURL: databaseURL)
        let parentsAgain = try app.post(parents, client: second.client)
        #expect(parentsAgain.json["duplicates"] as? Int == parents.count)
        for (index, batch) in batches.enumerated() {
            let response = try app.post(batch, client: second.client)
            #expect(response.status == 200)
            let statuses = Set((response.json["results"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? String })
            if index < stoppedAt {
                #expect(statuses == ["duplicate"], "batch \(index) was acknowledged before the kill: durable")
            } else if index == stoppedAt {
                #expect(statuses.count == 1, "the batch in flight at the kill applied all or nothing: \(statuses)")
            } else {
                #expect(statuses == ["accepted"], "batch \(index) was never applied before")
            }
        }

        let connection = try PostgresConnection(connectionString: databaseURL)
        defer { connection.close() }
        func count(_ sql: SQL) throws -> Int { try connection.query(sql)[0].decode(0, as: Int.self) }
        #expect(try count("SELECT count(*) FROM events WHERE app = \(app.id)") == total)
        #expect(try count("SELECT count(*) FROM messages WHERE app = \(app.id) AND created_seen") == total)
        for row in try connection.query("SELECT parent_id, reply_count FROM threads WHERE app = \(app.id)") {
            #expect(try row.decode(1, as: Int.self) == expectedReplies[try row.decode(0, as: String.self)])
        }
        // Every replier is subscribed to the threads they replied in, once.
        #expect(try count("SELECT count(*) FROM subscriptions WHERE app = \(app.id) AND NOT subscribed") == 0)
        let pairs = try count("""
            SELECT count(*) FROM (SELECT DISTINCT sender, parent_id FROM messages WHERE app = \(app.id) AND parent_id IS NOT NULL) p
             WHERE NOT EXISTS (SELECT 1 FROM subscriptions s WHERE s.app = \(app.id) AND s.uid = p.sender AND s.thread_id = p.parent_id
                                 AND s.subscribed)
            """)
        #expect(pairs == 0)
        second.signal(SIGTERM)
        #expect(second.wait() == 0)
        }
    }
}
