import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Postgres
import Synchronization
import Testing

/// What the integration tests share: the real server, in this process, on an ephemeral port,
/// against the PostgreSQL that `make test` started (DATABASE_URL).
final class TestEnvironment: Sendable {
    static let adminToken = "test-admin-token-" + UUID().uuidString

    /// Whether a database was given (`make test` starts one and sets DATABASE_URL); without it
    /// these suites are skipped, saying why, so that a plain `swift test` runs the unit tests.
    /// `make test` sets HERALD_TESTS_REQUIRE_DATABASE: there they run, and fail if it is missing.
    static let hasDatabase = ProcessInfo.processInfo.environment["DATABASE_URL"] != nil
        || ProcessInfo.processInfo.environment["HERALD_TESTS_REQUIRE_DATABASE"] != nil
    /// A python3 with h2, http_ece and PyJWT (`HERALD_TEST_PYTHON`; make test sets it to the
    /// test venv's), for the receivers that check direct delivery (scripts/push_receivers.py).
    static let pushPython = ProcessInfo.processInfo.environment["HERALD_TEST_PYTHON"]
    static let skipped: Comment = "needs PostgreSQL: DATABASE_URL is not set (make test starts a cluster and sets it)"

    let server: HeraldServer
    let client: HTTPClient
    let logs = LogRecorder()

    /// The environment, started on first use.
    static func shared() throws -> TestEnvironment {
        try cache.withLock { cached in
            if let cached { return cached }
            let environment = try TestEnvironment()
            cached = environment
            return environment
        }
    }

    private static let cache = Mutex<TestEnvironment?>(nil)

    private init() throws {
        let logs = self.logs
        server = try HeraldServer(configuration: try Self.configuration(),
                                  logger: Logger(level: .debug) { line in logs.append(line) })
        try server.start()
        client = HTTPClient(port: server.port)
    }

    /// A configuration for a server on an ephemeral port against `databaseURL`; `overrides` sets
    /// (or, with nil, removes) variables of the environment it is read from.
    static func configuration(databaseURL: String? = nil, overrides: [String: String?] = [:]) throws -> Configuration {
        var environment = ProcessInfo.processInfo.environment
        guard let url = databaseURL ?? environment["DATABASE_URL"] else {
            throw TestSetupError(message: "DATABASE_URL is not set: run the tests with `make test`")
        }
        environment["DATABASE_URL"] = url
        environment["HERALD_LISTEN"] = "127.0.0.1:0"
        environment["HERALD_ADMIN_TOKEN"] = adminToken
        environment["HERALD_THREADS"] = "8"
        environment["HERALD_DRAIN_TIMEOUT_SECONDS"] = "5"
        // The delivery tests' receivers listen on 127.0.0.1 (DeliveryAddressTests runs without it).
        environment["HERALD_DELIVERY_ALLOW_PRIVATE"] = "1"
        for (name, value) in overrides { environment[name] = value }
        return try Configuration(environment: environment)
    }

    /// A new connection to the test database, for checking rows directly.
    func connection() throws -> PostgresConnection {
        try PostgresConnection(connectionString: server.service.services.configuration.databaseURL!)
    }

    /// Runs `body` with the URL of a new, empty database in the test cluster (named `prefix_…`),
    /// dropped afterwards: for suites whose servers must not share the test database (each
    /// Herald on a database delivers and closes digests for all its apps).
    func withDatabaseOfItsOwn(prefix: String, _ body: (String) throws -> Void) throws {
        let base = server.service.services.configuration.databaseURL ?? ""
        let name = "\(prefix)_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try connection()
        try admin.queryOnce("CREATE DATABASE \(unsafeRaw: name)")
        defer { _ = try? admin.queryOnce("DROP DATABASE \(unsafeRaw: name) WITH (FORCE)") }
        let url = base.replacingOccurrences(of: "/herald?", with: "/\(name)?")
        guard url != base else { throw TestSetupError(message: "the test database URL does not name /herald: \(base)") }
        try body(url)
    }

    /// Creates a fresh app with one key per role, so that each test has its own tenant (through
    /// `client`, another server's, or this environment's).
    func makeApp(prefix: String = "app", client: HTTPClient? = nil) throws -> TestApp {
        let client = client ?? self.client
        let id = "\(prefix)-\(UUID().uuidString.prefix(12).lowercased())"
        let created = try client.post("/v1/apps", token: Self.adminToken, json: #"{"id":"\#(id)"}"#)
        guard created.status == 201 else { throw TestSetupError(message: "create app: \(created.status) \(created.text)") }
        var keys: [String: String] = [:]
        var keyIDs: [String: String] = [:]
        for role in ["ingest", "worker", "server"] {
            let key = try client.post("/v1/apps/\(id)/keys", token: Self.adminToken, json: #"{"role":"\#(role)"}"#)
            guard key.status == 201, let secret = key.json["key"] as? String, let keyID = key.json["id"] as? String else {
                throw TestSetupError(message: "create key: \(key.status) \(key.text)")
            }
            keys[role] = secret
            keyIDs[role] = keyID
        }
        return TestApp(id: id, keys: keys, keyIDs: keyIDs)
    }
}

/// Keeps every log line the server writes, so tests can read them.
final class LogRecorder: Sendable {
    private let lines = Mutex<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

struct TestApp: Sendable {
    let id: String
    let keys: [String: String]
    let keyIDs: [String: String]

    var serverKey: String { keys["server"]! }
    var ingestKey: String { keys["ingest"]! }
    var workerKey: String { keys["worker"]! }
}

struct TestSetupError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The repository's root folder, from this file's path.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// Runs a command and returns its exit status and output.
@discardableResult
func runCommand(_ arguments: [String], environment: [String: String]? = nil) throws -> (status: Int32, output: String) {
    let process = try Subprocess(arguments, environment: environment)
    let output = process.readAll()
    return (process.wait(), output)
}

/// A private PostgreSQL cluster in a temporary folder, for tests that stop the database.
final class PrivateCluster: Sendable {
    let directory: String
    let url: String
    private let script: String

    init() throws {
        script = ProcessInfo.processInfo.environment["HERALD_PG_SCRIPT"] ?? repositoryRoot + "/scripts/pg.sh"
        directory = NSTemporaryDirectory() + "herald-private-" + UUID().uuidString.prefix(8).lowercased()
        let initialised = try runCommand(["bash", script, "init", directory, "fast"])
        guard initialised.status == 0 else { throw TestSetupError(message: "pg init: \(initialised.output)") }
        let printed = try runCommand(["bash", script, "url", directory])
        url = printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
        try start()
    }

    func start() throws {
        let started = try runCommand(["bash", script, "start", directory])
        guard started.status == 0 else { throw TestSetupError(message: "pg start: \(started.output)") }
    }

    func stop() throws {
        let stopped = try runCommand(["bash", script, "stop", directory])
        guard stopped.status == 0 else { throw TestSetupError(message: "pg stop: \(stopped.output)") }
    }

    /// Stops the cluster and removes its folder.
    func destroy() {
        _ = try? stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Polls `condition` every 50 ms until it holds or `seconds` pass.
func eventually(seconds: Double = 15, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

/// Starts a separate in-process server with its own configuration (for limits and outages).
enum HeraldTestServer {
    static func start(_ configuration: Configuration) throws -> HeraldServer {
        let server = try HeraldServer(configuration: configuration, logger: Logger(level: .error) { _ in })
        try server.start()
        return server
    }
}

/// The result of work running on its own thread.
final class ThreadResult<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    private let done = DispatchSemaphore(value: 0)

    fileprivate func finish(_ result: T) {
        value.withLock { $0 = result }
        done.signal()
    }

    /// The result, or nil when it is not there within `seconds`.
    func wait(seconds: Double) -> T? {
        guard done.wait(timeout: .now() + seconds) == .success else { return nil }
        return value.withLock { $0 }
    }
}

extension Thread {
    /// Runs `body` on a new thread; its result is waited for with `wait(seconds:)`.
    static func detachNewThreadResult<T: Sendable>(_ body: @escaping @Sendable () -> T) -> ThreadResult<T> {
        let result = ThreadResult<T>()
        Thread.detachNewThread { result.finish(body()) }
        return result
    }
}
