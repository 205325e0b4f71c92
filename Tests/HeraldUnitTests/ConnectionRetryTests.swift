@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import HTTPServer
import Postgres
import Synchronization
import Testing

/// `RequestPipeline.againIfConnectionLost`: which requests run once more when a database
/// connection broke under them (issue 32, item 9).
@Suite("A lost connection and read-only requests")
struct ConnectionRetryTests {
    static let lost = PostgresError(code: .connectionLost, message: "server closed the connection unexpectedly")

    /// Runs `againIfConnectionLost` with work that fails with `failures` in turn, then answers 200;
    /// returns how many times the work ran and whether it answered.
    func run(_ method: String, failures: [PostgresError]) -> (runs: Int, answered: Bool) {
        let runs = Mutex(0)
        let answered = (try? RequestPipeline.againIfConnectionLost(Request(method: HTTPMethod(method), path: "/v1/users/u1/threads")) { () throws -> Int in
            let run = runs.withLock { count in count += 1; return count }
            if run <= failures.count { throw failures[run - 1] }
            return 200
        }) != nil
        return (runs.withLock { $0 }, answered)
    }

    @Test("GET and HEAD run once more after a lost connection, and answer from the second run", arguments: ["GET", "HEAD"])
    func readOnlyRetried(method: String) {
        let result = run(method, failures: [Self.lost])
        #expect(result.runs == 2 && result.answered)
    }

    @Test("only once: a second lost connection is the error (503)")
    func onlyOnce() {
        let result = run("GET", failures: [Self.lost, Self.lost])
        #expect(result.runs == 2 && !result.answered)
    }

    @Test("writes are not run twice (a commit may have happened before the connection broke)", arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func writesNotRetried(method: String) {
        let result = run(method, failures: [Self.lost])
        #expect(result.runs == 1 && !result.answered)
    }

    @Test("a database that cannot be reached, or a statement's own error, is not retried")
    func otherErrorsNotRetried() {
        for error in [PostgresError(code: .connectionFailure, message: "connection refused"),
                      PostgresError(code: .server, sqlState: "23505", message: "duplicate key"),
                      PostgresError(code: .poolTimeout, message: "no connection free")] {
            let result = run("GET", failures: [error])
            #expect(result.runs == 1 && !result.answered, "\(error)")
        }
    }
}
