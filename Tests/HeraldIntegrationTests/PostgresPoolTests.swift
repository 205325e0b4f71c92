import Postgres
@testable import HeraldTestSupport
import Testing

/// `PostgresPool.withConnection(affinity:)`: a caller that runs the same statements again gets the
/// connection it used last (where they are prepared and planned), not the pool's most recent.
@Suite("Postgres pool affinity", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PostgresPoolTests {
    /// A pool of three connections to the test database.
    static func pool() throws -> PostgresPool {
        PostgresPool(configuration: .init(connectionString: try TestEnvironment.configuration().databaseURL!, size: 3))
    }

    /// The server process behind a connection: which connection the pool handed out.
    func backend(_ connection: PostgresConnection) throws -> Int {
        try connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
    }

    @Test("an affinity key gets its last connection back while it is idle; the others are handed out as before")
    func affinity() throws {
        let pool = try Self.pool()
        // three connections open; the affinity key's is released first, so it ends deepest in the
        // idle list, under the two that a plain caller gets first
        var keyed = 0, plain = 0
        try pool.withConnection { outer in
            plain = try backend(outer)
            try pool.withConnection { _ in
                try pool.withConnection(affinity: 7) { keyed = try backend($0) }
            }
        }
        #expect(keyed != plain)
        #expect(try pool.withConnection { try backend($0) } == plain)
        #expect(try pool.withConnection(affinity: 7) { try backend($0) } == keyed)
        // while the key's connection is busy, the key takes another one
        try pool.withConnection(affinity: 7) { first in
            let busy = try backend(first)
            #expect(try pool.withConnection(affinity: 7) { try backend($0) } != busy)
        }
        pool.close()
    }

    @Test("a plain caller leaves a key's connection alone while another is idle or the pool has room, even when the key's was released last")
    func plainCallersPassOverKeyedConnections() throws {
        let pool = try Self.pool()
        // two connections open; the key's is released last, so it is the most recent idle one
        var keyed = 0, plain = 0
        try pool.withConnection { outer in
            plain = try backend(outer)
            try pool.withConnection(affinity: 3) { keyed = try backend($0) }
        }
        #expect(keyed != plain)
        try pool.withConnection(affinity: 3) { _ in }
        #expect(try pool.withConnection { try backend($0) } == plain)
        #expect(try pool.withConnection(affinity: 3) { try backend($0) } == keyed)
        // with only the key's connection idle, a plain caller opens another (the pool has room)…
        let (first, second) = try pool.withConnection { busy throws -> (Int, Int) in
            (try backend(busy), try pool.withConnection { try backend($0) })
        }
        #expect(first == plain)
        #expect(second != keyed && second != plain)
        // …and at the pool's size takes the key's rather than wait
        let (one, two, three) = try pool.withConnection { a throws -> (Int, Int, Int) in
            try pool.withConnection { b throws -> (Int, Int, Int) in
                (try backend(a), try backend(b), try pool.withConnection { try backend($0) })
            }
        }
        #expect(Set([one, two]) == Set([plain, second]))
        #expect(three == keyed)
        pool.close()
    }

    /// `replan()`: a connection plans its statements again before its next use. A generic plan
    /// made while a table was one page scans it (a scan of a page costs less than an index) and
    /// is kept as the table grows; nothing analyses the table again here (autovacuum off; a schema
    /// of its own, which the test servers' `PlanRefresher`, reading the current schema's tables,
    /// does not analyse: in `public` it did, when it looked between the growth and the next
    /// plan, and the plan changed before `replan()`), so only the pool's `DISCARD PLANS` can
    /// make it plan again.
    @Test("after replan(), a statement planned on a small table is planned again on the table it has become")
    func replanDiscardsPlans() throws {
        let pool = PostgresPool(configuration: .init(connectionString: try TestEnvironment.configuration().databaseURL!, size: 1))
        defer { pool.close() }
        let table = "replan_test.replan_\(UInt32.random(in: 0...UInt32.max))"
        let admin = try TestEnvironment.shared().connection()
        try admin.execute(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS replan_test; CREATE TABLE \(table) (id int PRIMARY KEY, v int) WITH (autovacuum_enabled = off); INSERT INTO \(table) VALUES (1, 1); ANALYZE \(table)")
        defer { _ = try? admin.execute(unsafeSQL: "DROP TABLE \(table)") }
        func plan() throws -> String {
            try pool.withConnection { connection in
                try connection.queryOnce(SQL(unsafeRaw: "EXPLAIN EXECUTE lookup(7)")).map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
            }
        }
        try pool.withConnection { connection in
            try connection.execute(unsafeSQL: "SET plan_cache_mode = force_generic_plan; PREPARE lookup(int) AS SELECT v FROM \(table) WHERE id = $1")
        }
        #expect(try plan().contains("Seq Scan"), "planned on one row")
        try admin.execute(unsafeSQL: "INSERT INTO \(table) SELECT i, i FROM generate_series(2, 100000) i")
        #expect(try plan().contains("Seq Scan"), "the plan is kept as the table grows")
        pool.replan()
        let again = try plan()
        #expect(again.contains("Index") && !again.contains("Seq Scan"), "\(again)")
    }
}
