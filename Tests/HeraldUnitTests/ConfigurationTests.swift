@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Testing

@Suite("Configuration")
struct ConfigurationTests {
    @Test("defaults when nothing is set")
    func defaults() throws {
        let configuration = try Configuration(environment: [:])
        #expect(configuration.databaseURL == nil)
        #expect(configuration.listenHost == "127.0.0.1")
        #expect(configuration.listenPort == 8080)
        #expect(configuration.adminToken == nil)
        #expect(configuration.threads == 16)
        #expect(configuration.databasePoolSize == 16)
        #expect(configuration.maxBodyBytes == 4 * 1024 * 1024)
        #expect(configuration.logLevel == .info)
    }

    @Test("every variable is read")
    func values() throws {
        let configuration = try Configuration(environment: [
            "DATABASE_URL": "postgresql:///x", "HERALD_LISTEN": "0.0.0.0:9000",
            "HERALD_ADMIN_TOKEN": "0123456789abcdef", "HERALD_THREADS": "4", "HERALD_MAX_BODY_BYTES": "2048",
            "HERALD_MAX_CONNECTIONS": "10", "HERALD_IDLE_TIMEOUT_SECONDS": "5", "HERALD_DRAIN_TIMEOUT_SECONDS": "7",
            "HERALD_LOG_LEVEL": "WARN", "HERALD_DB_ACQUIRE_TIMEOUT_MS": "250", "HERALD_MIGRATIONS_DIR": "/m",
            "HERALD_DEDUPE_RETENTION_DAYS": "30", "HERALD_INGEST_MAX_IN_FLIGHT": "3", "HERALD_DELIVERY_ALLOW_PRIVATE": "1",
            "HERALD_INGEST_LANES": "2",
        ])
        #expect(configuration.ingestLanes == 2)
        #expect(try Configuration(environment: ["HERALD_INGEST_LANES": "9", "HERALD_INGEST_MAX_IN_FLIGHT": "3"]).ingestLanes == 3,
                "never more rounds than requests in flight")
        #expect(try Configuration(environment: ["HERALD_THREADS": "64"]).ingestLanes >= 2, "at least two by default")
        #expect(configuration.deliveryAllowPrivate)
        #expect(!Configuration.default.deliveryAllowPrivate, "internal delivery addresses are refused unless allowed")
        #expect(configuration.dedupeRetentionDays == 30)
        #expect(configuration.ingestMaxInFlight == 3)
        #expect(configuration.databaseURL == "postgresql:///x")
        #expect(configuration.listenHost == "0.0.0.0")
        #expect(configuration.listenPort == 9000)
        #expect(configuration.adminToken == "0123456789abcdef")
        #expect(configuration.threads == 4)
        #expect(configuration.databasePoolSize == 4, "the pool follows the thread count unless set")
        #expect(configuration.maxBodyBytes == 2048)
        #expect(configuration.maxConnections == 10)
        #expect(configuration.idleTimeoutSeconds == 5)
        #expect(configuration.drainTimeoutSeconds == 7)
        #expect(configuration.logLevel == .warn)
        #expect(configuration.databaseAcquireTimeoutMs == 250)
        #expect(configuration.migrationsDirectory == "/m")
    }

    @Test("listen addresses", arguments: [
        ("127.0.0.1:0", "127.0.0.1", 0), ("localhost:8080", "localhost", 8080), ("[::1]:9", "::1", 9),
    ])
    func listen(text: String, host: String, port: Int) throws {
        let configuration = try Configuration(environment: ["HERALD_LISTEN": text])
        #expect(configuration.listenHost == host)
        #expect(configuration.listenPort == port)
    }

    @Test("malformed values name their variable", arguments: [
        ("HERALD_LISTEN", "8080"), ("HERALD_LISTEN", "host:99999"), ("HERALD_LISTEN", ":80"), ("HERALD_LISTEN", "::1:80"),
        ("HERALD_THREADS", "0"), ("HERALD_THREADS", "many"), ("HERALD_MAX_BODY_BYTES", "-1"),
        ("HERALD_LOG_LEVEL", "loud"), ("HERALD_ADMIN_TOKEN", "short"), ("HERALD_DEDUPE_RETENTION_DAYS", "3"),
        ("HERALD_INGEST_MAX_IN_FLIGHT", "0"), ("HERALD_DB_POOL_MODE", "statement"), ("HERALD_DELIVERY_ALLOW_PRIVATE", "yes"),
    ])
    func malformed(variable: String, value: String) {
        #expect(throws: ConfigurationError.self) { try Configuration(environment: [variable: value]) }
        do {
            _ = try Configuration(environment: [variable: value])
        } catch {
            #expect(error.variable == variable)
        }
    }

    @Test("an explicit pool size wins over the thread count")
    func poolSize() throws {
        let configuration = try Configuration(environment: ["HERALD_THREADS": "4", "HERALD_DB_POOL_SIZE": "12"])
        #expect(configuration.databasePoolSize == 12)
    }

    @Test("behind a transaction pooler: the mode and the listener's own URL")
    func poolMode() throws {
        #expect(try Configuration(environment: [:]).databasePoolMode == .session)
        #expect(try Configuration(environment: [:]).listenDatabaseURL == nil)
        let configuration = try Configuration(environment: ["HERALD_DB_POOL_MODE": "Transaction",
                                                            "HERALD_LISTEN_DATABASE_URL": "host=/run/pg dbname=herald"])
        #expect(configuration.databasePoolMode == .transaction)
        #expect(configuration.listenDatabaseURL == "host=/run/pg dbname=herald")
    }
}
