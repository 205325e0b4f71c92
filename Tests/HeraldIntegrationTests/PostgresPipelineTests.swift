import Postgres
@testable import HeraldTestSupport
import Testing

/// `PostgresConnection.send` and `pipeline`: statements queued without reading their rows travel
/// with the next statement that is read, in one round trip (libpq's pipeline mode).
@Suite("Postgres pipelines", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PostgresPipelineTests {
    @Test("queued statements run first, in order, and the awaited statements' rows come back")
    func order() throws {
        let connection = try TestEnvironment.shared().connection()
        try connection.query("CREATE TEMP TABLE pipeline_order (n int, note text)")
        try connection.withTransaction { connection in
            for n in 1...3 { try connection.send("INSERT INTO pipeline_order VALUES (\(n), \("queued \(n)"))") }
            let results = try connection.pipeline([
                "SELECT array_agg(n ORDER BY n)::text FROM pipeline_order",
                "INSERT INTO pipeline_order VALUES (4, 'awaited') RETURNING n",
                "SELECT count(*) FROM pipeline_order",
            ])
            #expect(results.count == 3)
            #expect(try results[0][0].decode(0, as: String.self) == "{1,2,3}")
            #expect(try results[1][0].decode(0, as: Int.self) == 4)
            #expect(try results[2][0].decode(0, as: Int.self) == 4)
            try connection.send("INSERT INTO pipeline_order VALUES (5, 'before commit')")
        }
        // the last one travelled with the COMMIT
        #expect(try connection.query("SELECT count(*) FROM pipeline_order")[0].decode(0, as: Int.self) == 5)
    }

    @Test("an error in a queued statement is thrown by the next read; nothing after it runs, and the transaction rolls back")
    func errors() throws {
        let connection = try TestEnvironment.shared().connection()
        try connection.query("CREATE TEMP TABLE pipeline_errors (n int PRIMARY KEY)")
        try connection.query("INSERT INTO pipeline_errors VALUES (1)")
        #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                try connection.send("INSERT INTO pipeline_errors VALUES (2)")
                try connection.send("INSERT INTO pipeline_errors VALUES (1)")   // a unique violation
                try connection.send("INSERT INTO pipeline_errors VALUES (3)")
                _ = try connection.query("SELECT 1")
                Issue.record("the read after a failed queued statement returned")
            }
        }
        do {
            try connection.withTransaction { connection in
                try connection.send("INSERT INTO pipeline_errors VALUES (4)")
                _ = try connection.query("SELECT 1 FROM pipeline_errors WHERE n = 'not a number'")
            }
            Issue.record("an invalid read did not throw")
        } catch let error as PostgresError {
            #expect(error.sqlState == "22P02")
        }
        // the connection is usable, and nothing of either transaction stayed
        #expect(try connection.query("SELECT array_agg(n ORDER BY n)::text FROM pipeline_errors")[0].decode(0, as: String.self) == "{1}")
    }

    @Test("a statement first prepared in a pipeline that failed is prepared again when next used")
    func preparedAfterFailure() throws {
        let connection = try TestEnvironment.shared().connection()
        let marker = "prepared-\(UInt64.random(in: 0...UInt64.max))"
        #expect(throws: PostgresError.self) {
            try connection.withTransaction { connection in
                try connection.send("SELECT 1 / 0")
                _ = try connection.query("SELECT \(marker)::text AS m")
            }
        }
        #expect(try connection.query("SELECT \(marker)::text AS m")[0].decode(0, as: String.self) == marker)
        try connection.withTransaction { connection in
            try connection.send("SELECT \(marker)::text AS m")
            #expect(try connection.query("SELECT \(marker)::text AS m")[0].decode(0, as: String.self) == marker)
        }
    }

    @Test("a parameter with a NUL byte is refused before anything is sent, and the connection stays usable")
    func nulParameter() throws {
        let connection = try TestEnvironment.shared().connection()
        try connection.query("CREATE TEMP TABLE pipeline_nul (t text)")
        do {
            try connection.withTransaction { connection in
                try connection.send("INSERT INTO pipeline_nul VALUES ('queued')")
                _ = try connection.query("INSERT INTO pipeline_nul VALUES (\("a\u{0}b")) RETURNING t")
            }
            Issue.record("a NUL parameter was sent")
        } catch let error as PostgresError {
            #expect(error.code == .invalidParameter)
        }
        #expect(try connection.query("SELECT count(*) FROM pipeline_nul")[0].decode(0, as: Int.self) == 0)
        // a caller that catches the refusal and goes on keeps its transaction and what it queued
        try connection.withTransaction { connection in
            try connection.send("INSERT INTO pipeline_nul VALUES ('kept')")
            #expect(throws: PostgresError.self) { try connection.query("SELECT \("x\u{0}")::text") }
            try connection.send("INSERT INTO pipeline_nul VALUES ('kept too')")
        }
        #expect(try connection.query("SELECT count(*) FROM pipeline_nul")[0].decode(0, as: Int.self) == 2)
        try connection.query("DELETE FROM pipeline_nul")
        try connection.withTransaction { connection in
            try connection.send("INSERT INTO pipeline_nul VALUES ('after')")
        }
        #expect(try connection.query("SELECT array_agg(t)::text FROM pipeline_nul")[0].decode(0, as: String.self) == "{after}")
    }

    @Test("a transaction whose body throws drops what it queued")
    func rollbackDrops() throws {
        struct Stop: Error {}
        let connection = try TestEnvironment.shared().connection()
        try connection.query("CREATE TEMP TABLE pipeline_dropped (n int)")
        #expect(throws: Stop.self) {
            try connection.withTransaction { connection in
                try connection.send("INSERT INTO pipeline_dropped VALUES (1)")
                throw Stop()
            }
        }
        #expect(try connection.query("SELECT count(*) FROM pipeline_dropped")[0].decode(0, as: Int.self) == 0)
    }
}
