import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Postgres
import Synchronization
@testable import HeraldTestSupport
import Testing

@Suite("Graceful shutdown", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ShutdownTests {
    @Test("SIGTERM while a slow request is in flight: no new connections, the request finishes, exit 0")
    func sigtermDrains() throws {
        let environment = try TestEnvironment.shared()
        let databaseURL = try #require(environment.server.service.services.configuration.databaseURL)
        let server = try ServerProcess(databaseURL: databaseURL)
        let process = server.process
        let reader = server.output
        let client = server.client
        #expect(try client.get("/healthz").status == 200)

        // Make a request slow for real: hold a lock its INSERT must wait for.
        let id = "slow-\(UUID().uuidString.prefix(8).lowercased())"
        let blocker = try PostgresConnection(connectionString: databaseURL)
        try blocker.query("BEGIN")
        try blocker.query("INSERT INTO apps (id) VALUES (\(id))")

        let result = Mutex<HTTPResult?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let response = try? client.post("/v1/apps", token: TestEnvironment.adminToken, json: #"{"id":"\#(id)"}"#)
            result.withLock { $0 = response }
            finished.signal()
        }
        // Watch from another connection: inside the blocker's transaction, pg_stat_activity would
        // be a snapshot taken at its first read. (On Citus the lock is waited for on a worker, and
        // the instance's session waits for the worker: active, not waiting on a lock itself.)
        let observer = try PostgresConnection(connectionString: databaseURL)
        let waiting = try eventually(seconds: 10) {
            let rows = try observer.query("""
                SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'herald' AND state = 'active' AND query LIKE 'INSERT INTO apps%'
                """)
            return try rows[0].decode(0, as: Int.self) > 0
        }
        #expect(waiting, "the request is in flight, blocked on the lock")

        server.signal(SIGTERM)
        #expect(eventually(seconds: 5) { (try? client.connect()).map { close($0); return false } ?? true },
                "no new connections after SIGTERM")
        usleep(300_000)
        #expect(process.isRunning, "still draining the request in flight")
        #expect(finished.wait(timeout: .now()) == .timedOut)

        // Let the slow request go: it completes with its real answer.
        try blocker.query("ROLLBACK")
        #expect(finished.wait(timeout: .now() + 10) == .success)
        let response = try #require(result.withLock { $0 })
        #expect(response.status == 201)
        #expect(response.json["id"] as? String == id)

        #expect(reader.firstLine(containing: "\"msg\":\"stopped\"", seconds: 10) != nil)
        #expect(server.wait() == 0, "exit status 0")
        let stored = try blocker.query("SELECT 1 FROM apps WHERE id = \(id)")
        #expect(stored.count == 1, "the drained request committed")
    }
}
