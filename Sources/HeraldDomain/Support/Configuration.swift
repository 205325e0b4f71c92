import Glibc

/// Herald's settings, read from the environment (SPEC §10).
package struct Configuration: Sendable, Equatable {
    /// libpq URL or conninfo string (`DATABASE_URL`).
    package var databaseURL: String?
    /// Listen host and port (`HERALD_LISTEN`, `host:port`; `[::1]:8080` for IPv6).
    package var listenHost: String
    package var listenPort: Int
    /// The admin token (`HERALD_ADMIN_TOKEN`); nil disables the admin API.
    package var adminToken: String?
    /// HTTP worker threads (`HERALD_THREADS`).
    package var threads: Int
    /// Database connections (`HERALD_DB_POOL_SIZE`, default: the thread count).
    package var databasePoolSize: Int
    /// Database connections of built-in delivery, apart from the requests' (`HERALD_DELIVERY_POOL_SIZE`).
    package var deliveryPoolSize = 4
    /// Whether built-in delivery may reach loopback, private, link-local and other internal
    /// addresses (`HERALD_DELIVERY_ALLOW_PRIVATE=1`; SPEC §13.3): for tests and closed networks.
    package var deliveryAllowPrivate = false
    /// A PEM file of certificate authorities that built-in delivery trusts besides the system's
    /// (`HERALD_DELIVERY_CA_FILE`; SPEC §13.4): for tests and closed networks.
    package var deliveryCAFile: String?
    /// What sits between Herald and PostgreSQL (`HERALD_DB_POOL_MODE`): `session` (nothing, or a
    /// pooler in session mode) or `transaction` (PgBouncer's `pool_mode = transaction`, where
    /// each transaction may run on another server connection: no prepared statements, and the
    /// notification listener needs `HERALD_LISTEN_DATABASE_URL`).
    package var databasePoolMode: DatabasePoolMode = .session
    /// What the database is (`HERALD_DB_MODE`): `postgres` or `citus` (the Citus layout of
    /// docs/scaling.md); unset: `citus` when the database has the citus extension.
    package var databaseMode: DatabaseMode?
    /// The connection the notification listener LISTENs on (`HERALD_LISTEN_DATABASE_URL`):
    /// `DATABASE_URL` unless set. Behind a transaction pooler, a URL that reaches PostgreSQL
    /// directly or through a session-mode pool; without one the long polls look every 250 ms.
    package var listenDatabaseURL: String?
    /// Milliseconds a request waits for a database connection before 429 (`HERALD_DB_ACQUIRE_TIMEOUT_MS`).
    package var databaseAcquireTimeoutMs: Int
    /// Largest request body in bytes (`HERALD_MAX_BODY_BYTES`).
    package var maxBodyBytes: Int
    /// Most open connections (`HERALD_MAX_CONNECTIONS`).
    package var maxConnections: Int
    /// Long polls (claims and feeds with `waitSeconds`) waiting at once (`HERALD_MAX_LONG_POLLS`,
    /// default half of `maxConnections`, so that short requests always find a connection); more
    /// are answered `429 ERR_OVERLOADED` at once.
    package var maxLongPolls = 2048
    /// Long polls of one app waiting at once (`HERALD_MAX_LONG_POLLS_PER_APP`, default half of
    /// `maxLongPolls`), so that one tenant cannot take every slot.
    package var maxLongPollsPerApp = 1024
    /// Feed long polls of one user waiting at once (`HERALD_MAX_LONG_POLLS_PER_USER`, default 10).
    package var maxLongPollsPerUser = 10
    /// Seconds an idle connection is kept (`HERALD_IDLE_TIMEOUT_SECONDS`).
    package var idleTimeoutSeconds: Int
    /// Seconds a new connection has to send a whole request head (`HERALD_HEADER_TIMEOUT_SECONDS`).
    package var headerTimeoutSeconds: Int
    /// Ingest requests in flight at once (`HERALD_INGEST_MAX_IN_FLIGHT`, default: four per
    /// thread); more wait for a slot. A request in flight holds no server thread (its connection
    /// waits suspended for its round); `ingestLanes` rounds run at once.
    package var ingestMaxInFlight: Int
    /// Ingest rounds (transactions) at once (`HERALD_INGEST_LANES`; default: two per core, at
    /// most three quarters of the threads, at least 2), never more than `ingestMaxInFlight`.
    /// Fewer lanes make larger rounds: a round's statements cost about as much for one event as
    /// for ten, and rounds beyond what the machine can run side by side only wait for its CPU
    /// (docs/subscriptions.md, "Group commit").
    package var ingestLanesSetting: Int?
    package var ingestLanes: Int {
        let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let lanes = ingestLanesSetting ?? max(2, min(2 * cores, threads * 3 / 4))
        return max(1, min(ingestMaxInFlight, lanes))
    }
    /// Ingest requests that may wait for a slot at once, each on a server thread: a quarter of
    /// the threads, so other routes keep theirs.
    package var ingestMaxWaiting: Int { max(1, threads / 4) }
    /// Milliseconds an ingest request waits for a slot before 429 (`HERALD_INGEST_QUEUE_MS`, 0: never waits).
    package var ingestQueueMilliseconds: Int
    /// Days dedupe records (and rejected events) are kept (`HERALD_DEDUPE_RETENTION_DAYS`, 7–3650).
    package var dedupeRetentionDays: Int
    /// Seconds a large-group fan-out task is leased to one worker (`HERALD_FANOUT_LEASE_SECONDS`):
    /// after a crash, another instance resumes it this long after the last chunk.
    package var fanoutLeaseSeconds: Int
    /// Seconds between two looks at the tables' sizes (`PlanRefresher`: a table that doubled has
    /// the statements planned again). Not an environment setting; tests shorten it.
    package var planCheckSeconds = 5.0
    /// Tests only (`HERALD_TEST_DIGEST_PAUSE_MS`): milliseconds a digest pass waits after deciding,
    /// before writing, so that a test can kill Herald there (SPEC §17: exactly once across a crash).
    package var testDigestPauseMs = 0
    /// Tests only (`HERALD_TEST_END_SERVICE`): the name of a service (`maintenance`, `http`, …)
    /// whose `run()` ends with an error a second after it starts, so that a test sees Herald
    /// notice a service that ended (`ServiceGroup`).
    package var testEndService: String?
    /// Seconds a shutdown waits for requests in flight (`HERALD_DRAIN_TIMEOUT_SECONDS`).
    package var drainTimeoutSeconds: Int
    /// `debug`, `info`, `warn` or `error` (`HERALD_LOG_LEVEL`).
    package var logLevel: LogLevel
    /// Where the SQL migrations are (`HERALD_MIGRATIONS_DIR`); nil: found next to the binary.
    package var migrationsDirectory: String?
    /// The OpenAPI document (`HERALD_OPENAPI_FILE`); nil: `openapi/openapi.json` found next to the binary.
    package var openAPIFile: String?
    /// The operator console's files (`HERALD_CONSOLE_DIR`); nil: `console/` found next to the binary.
    package var consoleDirectory: String?

    package static let `default` = Configuration(
        databaseURL: nil, listenHost: "127.0.0.1", listenPort: 8080, adminToken: nil, threads: 16,
        databasePoolSize: 16, databaseAcquireTimeoutMs: 5000, maxBodyBytes: 4 * 1024 * 1024,
        maxConnections: 4096, idleTimeoutSeconds: 60, headerTimeoutSeconds: 10, ingestMaxInFlight: 64, ingestQueueMilliseconds: 2000, dedupeRetentionDays: 7, fanoutLeaseSeconds: 60, drainTimeoutSeconds: 30, logLevel: .info,
        migrationsDirectory: nil)

    /// The names of every variable `init(environment:)` reads, for help texts.
    package static let variables: [(name: String, meaning: String)] = [
        ("DATABASE_URL", "PostgreSQL URL or conninfo (required)"),
        ("HERALD_LISTEN", "host:port to listen on (default 127.0.0.1:8080)"),
        ("HERALD_ADMIN_TOKEN", "admin token for /v1/apps (unset: admin API disabled); 16+ characters"),
        ("HERALD_THREADS", "HTTP worker threads (default 16)"),
        ("HERALD_DB_POOL_SIZE", "database connections (default: HERALD_THREADS)"),
        ("HERALD_DB_ACQUIRE_TIMEOUT_MS", "wait for a free connection before 429 (default 5000)"),
        ("HERALD_DB_POOL_MODE", "session (default) or transaction (behind PgBouncer's pool_mode = transaction: no prepared statements)"),
        ("HERALD_DB_MODE", "postgres or citus (lay the schema out over a Citus cluster; default: citus when the database has the citus extension)"),
        ("HERALD_LISTEN_DATABASE_URL", "URL for LISTEN/NOTIFY (default DATABASE_URL; behind a transaction pooler, one that bypasses it)"),
        ("HERALD_DELIVERY_POOL_SIZE", "database connections of built-in delivery, apart from the requests' (default 4)"),
        ("HERALD_DELIVERY_ALLOW_PRIVATE", "1: delivery URLs may reach loopback, private and link-local addresses (default 0: refused)"),
        ("HERALD_DELIVERY_CA_FILE", "PEM file of certificate authorities delivery trusts besides the system's (default: none)"),
        ("HERALD_MAX_BODY_BYTES", "largest request body (default 4194304)"),
        ("HERALD_MAX_CONNECTIONS", "most open HTTP connections (default 4096)"),
        ("HERALD_MAX_LONG_POLLS", "long polls (claims, feeds with waitSeconds) waiting at once; more get 429 (default: half of HERALD_MAX_CONNECTIONS)"),
        ("HERALD_MAX_LONG_POLLS_PER_APP", "long polls of one app waiting at once (default: half of HERALD_MAX_LONG_POLLS)"),
        ("HERALD_MAX_LONG_POLLS_PER_USER", "feed long polls of one user waiting at once (default 10)"),
        ("HERALD_IDLE_TIMEOUT_SECONDS", "idle connection timeout (default 60)"),
        ("HERALD_HEADER_TIMEOUT_SECONDS", "a new connection's deadline for its request head (default 10)"),
        ("HERALD_INGEST_MAX_IN_FLIGHT", "ingest requests in flight at once (default 4 per thread)"),
        ("HERALD_INGEST_LANES", "ingest rounds at once (default: 2 per core, at most 3/4 of the threads)"),
        ("HERALD_INGEST_QUEUE_MS", "wait for an ingest slot before 429 (default 2000; 0: answer 429 at once)"),
        ("HERALD_DRAIN_TIMEOUT_SECONDS", "shutdown wait for requests in flight (default 30)"),
        ("HERALD_DEDUPE_RETENTION_DAYS", "days events are remembered for dedupe (default 7, at least 7)"),
        ("HERALD_FANOUT_LEASE_SECONDS", "lease of a large-group fan-out task (default 60)"),
        ("HERALD_LOG_LEVEL", "debug, info, warn or error (default info)"),
        ("HERALD_TEST_DIGEST_PAUSE_MS", "tests only: a digest pass waits this long between deciding and writing (default 0)"),
        ("HERALD_TEST_END_SERVICE", "tests only: this service (maintenance, http, …) ends with an error a second after it starts (default none)"),
        ("HERALD_MIGRATIONS_DIR", "folder of the SQL migrations (default: found beside the binary)"),
        ("HERALD_OPENAPI_FILE", "the OpenAPI document served at /openapi.json (default: openapi/openapi.json found beside the binary)"),
        ("HERALD_CONSOLE_DIR", "the operator console's files, served at /console/ (default: console/ found beside the binary)"),
    ]

    /// Reads the environment; a malformed value is an error that names the variable.
    package init(environment: [String: String]) throws(ConfigurationError) {
        self = .default
        func value(_ name: String) -> String? {
            guard let raw = environment[name], !raw.isEmpty else { return nil }
            return raw
        }
        func integer(_ name: String, _ range: ClosedRange<Int>) throws(ConfigurationError) -> Int? {
            guard let raw = value(name) else { return nil }
            guard let number = Int(raw), range.contains(number) else {
                throw ConfigurationError(variable: name,
                                         message: "must be an integer from \(range.lowerBound) to \(range.upperBound), got \(raw.debugDescription)")
            }
            return number
        }
        databaseURL = value("DATABASE_URL")
        if let listen = value("HERALD_LISTEN") {
            (listenHost, listenPort) = try Self.parseListen(listen)
        }
        if let token = value("HERALD_ADMIN_TOKEN") {
            guard token.count >= 16 else {
                throw ConfigurationError(variable: "HERALD_ADMIN_TOKEN", message: "must be at least 16 characters")
            }
            adminToken = token
        }
        if let threads = try integer("HERALD_THREADS", 1...512) { self.threads = threads }
        databasePoolSize = try integer("HERALD_DB_POOL_SIZE", 1...512) ?? threads
        if let timeout = try integer("HERALD_DB_ACQUIRE_TIMEOUT_MS", 1...600_000) { databaseAcquireTimeoutMs = timeout }
        if let mode = value("HERALD_DB_POOL_MODE") {
            guard let parsed = DatabasePoolMode(rawValue: mode.lowercased()) else {
                throw ConfigurationError(variable: "HERALD_DB_POOL_MODE", message: "must be session or transaction, got \(mode.debugDescription)")
            }
            databasePoolMode = parsed
        }
        if let mode = value("HERALD_DB_MODE") {
            guard let parsed = DatabaseMode(rawValue: mode.lowercased()) else {
                throw ConfigurationError(variable: "HERALD_DB_MODE", message: "must be postgres or citus, got \(mode.debugDescription)")
            }
            databaseMode = parsed
        }
        listenDatabaseURL = value("HERALD_LISTEN_DATABASE_URL")
        if let size = try integer("HERALD_DELIVERY_POOL_SIZE", 1...256) { deliveryPoolSize = size }
        if let allow = try integer("HERALD_DELIVERY_ALLOW_PRIVATE", 0...1) { deliveryAllowPrivate = allow == 1 }
        if let file = value("HERALD_DELIVERY_CA_FILE") {
            guard access(file, R_OK) == 0 else {
                throw ConfigurationError(variable: "HERALD_DELIVERY_CA_FILE", message: "\(file.debugDescription) is not a readable file")
            }
            deliveryCAFile = file
        }
        if let bytes = try integer("HERALD_MAX_BODY_BYTES", 1024...(1 << 30)) { maxBodyBytes = bytes }
        if let connections = try integer("HERALD_MAX_CONNECTIONS", 1...1_000_000) { maxConnections = connections }
        maxLongPolls = try integer("HERALD_MAX_LONG_POLLS", 1...1_000_000) ?? max(1, maxConnections / 2)
        maxLongPollsPerApp = try integer("HERALD_MAX_LONG_POLLS_PER_APP", 1...1_000_000) ?? max(1, maxLongPolls / 2)
        if let perUser = try integer("HERALD_MAX_LONG_POLLS_PER_USER", 1...1_000) { maxLongPollsPerUser = perUser }
        if let idle = try integer("HERALD_IDLE_TIMEOUT_SECONDS", 1...86_400) { idleTimeoutSeconds = idle }
        if let head = try integer("HERALD_HEADER_TIMEOUT_SECONDS", 1...3_600) { headerTimeoutSeconds = head }
        ingestMaxInFlight = try integer("HERALD_INGEST_MAX_IN_FLIGHT", 1...4096) ?? max(1, threads * 4)
        ingestLanesSetting = try integer("HERALD_INGEST_LANES", 1...512)
        if let wait = try integer("HERALD_INGEST_QUEUE_MS", 0...60_000) { ingestQueueMilliseconds = wait }
        if let days = try integer("HERALD_DEDUPE_RETENTION_DAYS", 7...3650) { dedupeRetentionDays = days }
        if let lease = try integer("HERALD_FANOUT_LEASE_SECONDS", 1...3600) { fanoutLeaseSeconds = lease }
        if let drain = try integer("HERALD_DRAIN_TIMEOUT_SECONDS", 0...3_600) { drainTimeoutSeconds = drain }
        if let pause = try integer("HERALD_TEST_DIGEST_PAUSE_MS", 0...600_000) { testDigestPauseMs = pause }
        testEndService = value("HERALD_TEST_END_SERVICE")
        if let level = value("HERALD_LOG_LEVEL") {
            guard let parsed = LogLevel(rawValue: level.lowercased()) else {
                throw ConfigurationError(variable: "HERALD_LOG_LEVEL", message: "must be debug, info, warn or error, got \(level.debugDescription)")
            }
            logLevel = parsed
        }
        migrationsDirectory = value("HERALD_MIGRATIONS_DIR")
        openAPIFile = value("HERALD_OPENAPI_FILE")
        consoleDirectory = value("HERALD_CONSOLE_DIR")
    }

    package init(databaseURL: String?, listenHost: String, listenPort: Int, adminToken: String?, threads: Int,
         databasePoolSize: Int, databaseAcquireTimeoutMs: Int, maxBodyBytes: Int, maxConnections: Int,
         idleTimeoutSeconds: Int, headerTimeoutSeconds: Int, ingestMaxInFlight: Int, ingestQueueMilliseconds: Int, dedupeRetentionDays: Int, fanoutLeaseSeconds: Int, drainTimeoutSeconds: Int, logLevel: LogLevel, migrationsDirectory: String?) {
        self.databaseURL = databaseURL
        self.listenHost = listenHost
        self.listenPort = listenPort
        self.adminToken = adminToken
        self.threads = threads
        self.databasePoolSize = databasePoolSize
        self.databaseAcquireTimeoutMs = databaseAcquireTimeoutMs
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.headerTimeoutSeconds = headerTimeoutSeconds
        self.ingestMaxInFlight = ingestMaxInFlight
        self.ingestQueueMilliseconds = ingestQueueMilliseconds
        self.dedupeRetentionDays = dedupeRetentionDays
        self.fanoutLeaseSeconds = fanoutLeaseSeconds
        self.drainTimeoutSeconds = drainTimeoutSeconds
        self.logLevel = logLevel
        self.migrationsDirectory = migrationsDirectory
    }

    /// `127.0.0.1:8080`, `0.0.0.0:80`, `[::1]:8080`, `localhost:0`.
    package static func parseListen(_ text: String) throws(ConfigurationError) -> (String, Int) {
        let error = ConfigurationError(variable: "HERALD_LISTEN", message: "must be host:port (port 0-65535), got \(text.debugDescription)")
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw error }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw error }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { throw error }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { throw error }
        }
        guard !host.isEmpty, let port = Int(portText), (0...65_535).contains(port) else { throw error }
        return (String(host), port)
    }
}

/// How Herald's connections reach PostgreSQL (`HERALD_DB_POOL_MODE`).
package enum DatabasePoolMode: String, Sendable, Equatable {
    /// Each connection is one server session: prepared statements and LISTEN work.
    case session
    /// A pooler hands each transaction to any server connection (PgBouncer `pool_mode =
    /// transaction`): statements are sent unnamed, and session state is never relied on.
    case transaction
}

/// What kind of database Herald lays its schema out for (`HERALD_DB_MODE`).
package enum DatabaseMode: String, Sendable, Equatable {
    /// One PostgreSQL (with standbys and poolers): every table local.
    case postgres
    /// A Citus coordinator: the apps' tables distributed by `app` over the workers
    /// (sql/citus/layout.sql, docs/scaling.md).
    case citus
}

/// A configuration variable has a value Herald cannot use.
package struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    package let variable: String
    package let message: String

    package init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }
    package var description: String { "\(variable) \(message)" }
}
