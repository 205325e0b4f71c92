import Postgres
@testable import HeraldTestSupport
import Testing

/// What the pool does when its connection reaches a server that cannot write (after a
/// failover, a reconnect can land on a standby, or an old primary can come back as one), and
/// what a pooler in transaction mode needs (statements sent unnamed). The whole failover, with
/// a real standby, is `make fleet-test` (scripts/fleet_test.py, fault 3).
@Suite("Postgres failover and poolers", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PostgresFailoverTests {
    @Test("a read-only answer (25006) is 'unavailable', and the connection is replaced before its next use")
    func readOnlyReconnects() throws {
        let environment = try TestEnvironment.shared()
        let url = try #require(environment.server.service.services.configuration.databaseURL)
        let pool = PostgresPool(configuration: .init(connectionString: url, size: 1))
        defer { pool.close() }
        // The session now behaves like a standby's: every write is refused.
        let firstPID = try pool.withConnection { connection -> Int in
            try connection.query("SET default_transaction_read_only = on")
            return try connection.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
        }
        do {
            try pool.withConnection { connection in _ = try connection.query("SELECT nextval('change_seq')") }
            Issue.record("a write on a read-only session succeeded")
        } catch let error as PostgresError {
            #expect(error.sqlState == "25006")
            #expect(error.isUnavailable, "a server that cannot write must map to 503, not 500")
        }
        // The next caller gets a new session, where the write works.
        let (pid, readOnly) = try pool.withConnection { connection -> (Int, String) in
            _ = try connection.query("SELECT nextval('change_seq')")
            let rows = try connection.query("SELECT pg_backend_pid(), current_setting('default_transaction_read_only')")
            return (try rows[0].decode(0, as: Int.self), try rows[0].decode(1, as: String.self))
        }
        #expect(pid != firstPID)
        #expect(readOnly == "off")
    }

    @Test("a pooled connection whose session the server ended while it sat idle is replaced before it is handed out")
    func endedWhileIdle() throws {
        let environment = try TestEnvironment.shared()
        let url = try #require(environment.server.service.services.configuration.databaseURL)
        let pool = PostgresPool(configuration: .init(connectionString: url, size: 1))
        defer { pool.close() }
        let firstPID = try pool.withConnection { try $0.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) }
        // What a restart, a failover or pg_terminate_backend does to an idle session: the server
        // sends a FATAL error and closes it.
        let other = try environment.connection()
        #expect(try other.query("SELECT pg_terminate_backend(\(firstPID)::int)")[0].decode(0, as: Bool.self))
        #expect(try eventually(seconds: 5) {
            try other.query("SELECT count(*) FROM pg_stat_activity WHERE pid = \(firstPID)")[0].decode(0, as: Int.self) == 0
        })
        let pid = try pool.withConnection { try $0.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) }
        #expect(pid != firstPID)
    }

    @Test("without prepared statements (HERALD_DB_POOL_MODE=transaction) no statement is left prepared on the server")
    func unnamedStatements() throws {
        let environment = try TestEnvironment.shared()
        let url = try #require(environment.server.service.services.configuration.databaseURL)
        let unnamed = try PostgresConnection(connectionString: url, prepareStatements: false)
        for n in 0..<3 { #expect(try unnamed.query("SELECT \(n)::int + 1")[0].decode(0, as: Int.self) == n + 1) }
        #expect(try unnamed.query("SELECT count(*) FROM pg_prepared_statements")[0].decode(0, as: Int.self) == 0)
        let prepared = try PostgresConnection(connectionString: url)
        _ = try prepared.query("SELECT \(1)::int + 1")
        #expect(try prepared.query("SELECT count(*) FROM pg_prepared_statements")[0].decode(0, as: Int.self) == 2)
    }
}
