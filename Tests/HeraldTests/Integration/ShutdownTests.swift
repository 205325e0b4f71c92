import Foundation
import HeraldCore
import Postgres
import Synchronization
import Testing

@Suite("Graceful shutdown")
struct ShutdownTests {
    /// The `herald` binary that `swift build` put beside the tests.
    static var binary: String { repositoryRoot + "/.build/debug/herald" }

    @Test("SIGTERM while a slow request is in flight: no new connections, the request finishes, exit 0")
    func sigtermDrains() throws {
        let environment = try TestEnvironment.shared()
        let databaseURL = try #require(environment.server.service.services.configuration.databaseURL)
        #expect(FileManager.default.isExecutableFile(atPath: Self.binary), "build first: swift build")

        let process = try Subprocess([Self.binary, "serve"], environment: [
            "DATABASE_URL": databaseURL, "HERALD_LISTEN": "127.0.0.1:0",
            "HERALD_ADMIN_TOKEN": TestEnvironment.adminToken, "HERALD_THREADS": "4",
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ])
        defer { if process.isRunning { kill(process.pid, SIGKILL); _ = process.wait() } }

        // The port is in the "listening" log line.
        let reader = LineReader(process.output)
        let listening = try #require(reader.firstLine(containing: "\"msg\":\"listening\"", seconds: 30))
        let object = try JSONSerialization.jsonObject(with: Data(listening.utf8)) as? [String: Any]
        let port = try #require(object?["port"] as? Int)
        let client = HTTPClient(port: port)
        #expect(try client.get("/healthz").status == 200)

        // Make a request slow for real: hold a lock its INSERT must wait for.
        let id = "slow-\(UUID().uuidString.prefix(8).lowercased())"
        let blocker = try PostgresConnection(connectionString: databaseURL)
        try blocker.query("BEGIN")
        try blocker.query("INSERT INTO apps (id) VALUES ($1)", [id])

        let result = Mutex<HTTPResult?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let response = try? client.post("/v1/apps", token: TestEnvironment.adminToken, json: #"{"id":"\#(id)"}"#)
            result.withLock { $0 = response }
            finished.signal()
        }
        // Watch from another connection: inside the blocker's transaction, pg_stat_activity would
        // be a snapshot taken at its first read.
        let observer = try PostgresConnection(connectionString: databaseURL)
        let waiting = try eventually(seconds: 10) {
            let rows = try observer.query("""
                SELECT count(*) FROM pg_stat_activity
                WHERE application_name = 'herald' AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO apps%'
                """)
            return try rows[0].decode(0, as: Int.self) > 0
        }
        #expect(waiting, "the request is in flight, blocked on the lock")

        kill(process.pid, SIGTERM)
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
        #expect(process.wait() == 0, "exit status 0")
        let stored = try blocker.query("SELECT 1 FROM apps WHERE id = $1", [id])
        #expect(stored.count == 1, "the drained request committed")
    }
}

/// Reads a pipe line by line on a background thread.
final class LineReader: Sendable {
    private let lines = LogRecorder()

    init(_ fd: Int32) {
        let lines = self.lines
        Thread.detachNewThread {
            var buffer = Data()
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &chunk, chunk.count)
                if count <= 0 { return }
                buffer.append(contentsOf: chunk[0..<count])
                while let newline = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    lines.append(line)
                }
            }
        }
    }

    func firstLine(containing text: String, seconds: Double) -> String? {
        var found: String?
        _ = eventually(seconds: seconds) {
            found = lines.all.first { $0.contains(text) }
            return found != nil
        }
        return found
    }
}
