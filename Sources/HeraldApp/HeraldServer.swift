import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import HTTPServer
import Postgres
import Synchronization

/// A Herald instance: `init` builds it (configuration read, files loaded, nothing connected),
/// `start()` runs it — migrations applied, then every service started in order, the HTTP server
/// listening — and `shutdown()` stops it. Run by `herald serve` and by the integration tests (on port 0).
package final class HeraldServer: Sendable {
    package let service: RequestPipeline
    package let http: HTTPServer
    package let database: PostgresPool
    /// Built-in delivery's own connections, so that delivering never takes one a request needs.
    package let deliveryDatabase: PostgresPool
    /// Built-in delivery (SPEC §13.3–13.4).
    package let delivery: DeliveryLoop
    package let maintenance: Maintenance
    /// Acts on digest windows that ended (SPEC §17).
    package let digests: DigestCloser
    /// What runs, in start order; shutdown stops it in reverse (swift-service-lifecycle's shape).
    package let group: ServiceGroup

    /// The port actually bound (useful with port 0), once started.
    package var port: Int { http.port }

    /// The service whose unexpected end stopped this Herald, if one did (`ServiceGroup`).
    package var unexpectedEnd: ServiceGroup.End? { group.unexpectedEnd }

    /// Builds a Herald without connecting. Throws when the configuration lacks `DATABASE_URL` or
    /// names no service in `HERALD_TEST_END_SERVICE`, or a file it serves (migrations, OpenAPI,
    /// console) cannot be read. `onUnexpectedEnd` is called, once, after a service ended when
    /// no shutdown was asked and the others were stopped; the group logs the end itself, so the
    /// default does nothing more (the integration tests), and `herald serve` exits non-zero.
    package init(configuration: Configuration, logger: Logger,
                onUnexpectedEnd: @escaping @Sendable (ServiceGroup.End) -> Void = { _ in }) throws {
        guard let databaseURL = configuration.databaseURL else {
            throw ConfigurationError(variable: "DATABASE_URL", message: "is required")
        }
        let migrator = try Migrator(directory: Migration.locateDirectory(configured: configuration.migrationsDirectory), mode: configuration.databaseMode)
        let openAPI = try OpenAPIDocument.load(configured: configuration.openAPIFile)
        let console = try ConsoleFiles.load(configured: configuration.consoleDirectory)
        let prepare = configuration.databasePoolMode == .session
        database = PostgresPool(configuration: .init(
            connectionString: databaseURL, size: configuration.databasePoolSize,
            acquireTimeoutSeconds: Double(configuration.databaseAcquireTimeoutMs) / 1000, prepareStatements: prepare,
            settings: Self.sessionSettings(prepare: prepare)))
        if configuration.adminToken == nil {
            logger.warn("HERALD_ADMIN_TOKEN is not set: the admin API refuses every request")
        }
        let metrics = Metrics()
        let fanout = FanoutWorker(database: database, logger: logger, metrics: metrics, leaseSeconds: configuration.fanoutLeaseSeconds)
        let longPolls = LongPollGate(limits: .init(total: configuration.maxLongPolls, perApp: configuration.maxLongPollsPerApp,
                                                   perUser: configuration.maxLongPollsPerUser))
        let jobWaiter = JobWaiter(database: database, metrics: metrics, gate: longPolls)
        let changeWaiter = ChangeWaiter(database: database, gate: longPolls)
        // LISTEN needs a session of its own: behind a transaction pooler, only a URL that
        // bypasses it (without one the waiters look every 250 ms, as when the listener is down).
        let listenURL = configuration.listenDatabaseURL ?? (configuration.databasePoolMode == .session ? databaseURL : nil)
        if listenURL == nil {
            logger.warn("HERALD_DB_POOL_MODE is transaction and HERALD_LISTEN_DATABASE_URL is not set: long polls look every 250 ms instead of listening")
        }
        deliveryDatabase = PostgresPool(configuration: .init(
            connectionString: databaseURL, size: configuration.deliveryPoolSize, acquireTimeoutSeconds: 30,
            applicationName: "herald-delivery", prepareStatements: prepare, settings: Self.sessionSettings(prepare: prepare)))
        delivery = DeliveryLoop(database: deliveryDatabase, metrics: metrics, logger: logger,
                                    allowPrivateAddresses: configuration.deliveryAllowPrivate, caFile: configuration.deliveryCAFile)
        let notifications = NotificationListener(connectionString: listenURL, changes: changeWaiter, jobs: jobWaiter, delivery: delivery,
                                                 databaseMode: configuration.databaseMode, logger: logger)
        service = RequestPipeline(services: Dependencies(configuration: configuration, database: database, logger: logger,
                                             migrator: migrator, fanout: fanout, jobWaiter: jobWaiter, changeWaiter: changeWaiter, delivery: delivery, metrics: metrics,
                                             inboxRefresher: InboxRefresher(database: database, logger: logger),
                                             openAPI: openAPI, console: console))
        let service = self.service
        http = HTTPServer(configuration: .init(
            host: configuration.listenHost, port: configuration.listenPort, threads: configuration.threads,
            maxConnections: configuration.maxConnections, connectionTimeoutSeconds: configuration.idleTimeoutSeconds,
            headerTimeoutSeconds: configuration.headerTimeoutSeconds, maxBodyBytes: configuration.maxBodyBytes)) { request in service.respond(request) }
        maintenance = Maintenance(database: database, retentionDays: configuration.dedupeRetentionDays, logger: logger)
        digests = DigestCloser(database: database, logger: logger, pauseAfterDecidingMs: configuration.testDigestPauseMs)
        // The pools first (migrated when prepared), closed last; then the workers, then the
        // listener; the long-poll waiters last, so that they are the first stopped: their long
        // polls are answered before the listener drains. The workers stop together (none needs
        // another); the rest one by one.
        var stages: [[any Service]] = [
            [DatabasePools(pools: [database, deliveryDatabase], migrator: migrator, logger: logger)],
            [maintenance, fanout, digests, service.services.inboxRefresher, delivery,
             PlanRefresher(database: database, others: [deliveryDatabase], logger: logger, intervalSeconds: configuration.planCheckSeconds)],
            [Listener(http: http, drainTimeoutSeconds: Double(configuration.drainTimeoutSeconds))],
            [notifications], [jobWaiter], [changeWaiter],
        ]
        if let name = configuration.testEndService { stages = try EndedByTest.wrap(name, in: stages) }
        group = ServiceGroup(stages: stages, logger: logger) { end in
            logger.info("stopped")
            onUnexpectedEnd(end)
        }
    }

    /// What Herald's sessions set when they connect: no JIT compilation. Herald's statements take
    /// milliseconds, and JIT compiles at every execution of a plan whose estimate passes
    /// `jit_above_cost` (tens of milliseconds), which a generic plan made from stale statistics
    /// can (`PlanningTests.noJIT`). Behind a pooler in transaction mode a session setting would
    /// reach another client's session: none then, and the PL/pgSQL functions turn it off themselves.
    static func sessionSettings(prepare: Bool) -> [(name: String, value: String)] {
        prepare ? [("jit", "off")] : []
    }

    /// Connects, migrates, and starts every service, the HTTP server listening. Throws when the
    /// database is unreachable, a migration fails, the address cannot be bound, or a service ended
    /// while starting; what had started is stopped again, in reverse, and the pools are closed.
    package func start() throws {
        try group.start()
        let services = service.services
        services.logger.info("listening", ["host": .string(services.configuration.listenHost), "port": .int(http.port),
                                           "threads": .int(services.configuration.threads),
                                           "schemaVersion": .int(services.migrator.latestVersion)])
    }

    /// Stops accepting, finishes requests in flight, then closes the database pools.
    ///
    /// In reverse start order up to the HTTP listener — waiting long polls answered (≤ 10 s for
    /// claims, ≤ 10 s for feeds), the notification listener (≤ 5 s), requests in flight drained
    /// (≤ `HERALD_DRAIN_TIMEOUT_SECONDS`) — then the background workers together, since none
    /// needs another: delivery (≤ 90 s: its deliverers finish their requests, ≤ 60 s each, in
    /// parallel), the inbox refresher (≤ 30 s), the fan-out chunk (≤ 30 s), maintenance and digests
    /// (≤ 10 s); then the pools close. Worst case: 25 s + the drain timeout + 90 s (145 s with the
    /// default 30); one after another the workers alone could take 170 s. deploy/ sizes its stop
    /// budgets from this. After an unexpected end the services were stopped already: this waits
    /// for that, if it is still going on.
    package func shutdown() {
        let logger = service.services.logger
        let stopped = group.shutdown { logger.info("shutting down", ["inFlight": .int(http.inFlight)]) }
        if stopped { logger.info("stopped") }
    }
}

extension FanoutWorker: Service {}
extension JobWaiter: Service {}
extension ChangeWaiter: Service {}
extension NotificationListener: Service {}
extension InboxRefresher: Service {}
extension Maintenance: Service {}
extension DigestCloser: Service {}
extension DeliveryLoop: Service {}

/// The database pools as a service: migrated when prepared (the first service), closed when
/// stopped (the last), once every service that uses them has stopped.
package final class DatabasePools: Service {
    package let pools: [PostgresPool]
    package let migrator: Migrator
    package let logger: Logger
    private let stopSignal = DispatchSemaphore(value: 0)

    package init(pools: [PostgresPool], migrator: Migrator, logger: Logger) {
        self.pools = pools
        self.migrator = migrator
        self.logger = logger
    }

    package var name: String { "database" }
    package var shutdownTimeoutSeconds: Double? { nil }

    /// Applies the migrations (SQL functions included); on failure the pools close again.
    package func prepare() throws {
        do {
            let applied = try pools[0].withConnection { try migrator.migrate($0) }
            for migration in applied {
                logger.info("migration applied", ["version": .int(migration.version), "name": .string(migration.name)])
            }
        } catch {
            for pool in pools { pool.close() }
            throw error
        }
    }

    package func run() {
        stopSignal.wait()
        for pool in pools { pool.close() }
    }

    package func shutdown() { stopSignal.signal() }
}

/// The HTTP server as a service: prepared, it binds and serves; stopping it stops accepting
/// and drains the requests in flight (bounded by `HERALD_DRAIN_TIMEOUT_SECONDS`).
package final class Listener: Service {
    package let http: HTTPServer
    package let drainTimeoutSeconds: Double
    private let stopSignal = DispatchSemaphore(value: 0)

    package init(http: HTTPServer, drainTimeoutSeconds: Double) {
        self.http = http
        self.drainTimeoutSeconds = drainTimeoutSeconds
    }

    package var name: String { "http" }
    /// The drain bounds itself; stopping libmicrohttpd's threads after it is waited for.
    package var shutdownTimeoutSeconds: Double? { nil }

    package func prepare() throws { try http.start() }

    package func run() {
        stopSignal.wait()
        http.shutdown(drainTimeoutSeconds: drainTimeoutSeconds)
    }

    package func shutdown() { stopSignal.signal() }
}

/// Test hook (`HERALD_TEST_END_SERVICE`): the named service is stopped a second after it
/// starts running, and its `run()` then throws `Ended`, as a loop that died would; for the test
/// that a service's unexpected end stops `herald serve` with a non-zero status.
package final class EndedByTest: Service {
    /// The error the service's `run()` throws.
    package struct Ended: Error, CustomStringConvertible {
        package var description: String { "HERALD_TEST_END_SERVICE ended it" }
    }

    package let base: any Service
    package let afterSeconds: Double
    private let asked = Atomic<Bool>(false)

    package init(_ base: any Service, afterSeconds: Double = 1) {
        self.base = base
        self.afterSeconds = afterSeconds
    }

    /// `stages` with the service called `name` wrapped; a name no service has is a configuration error.
    package static func wrap(_ name: String, in stages: [[any Service]]) throws -> [[any Service]] {
        guard stages.joined().contains(where: { $0.name == name }) else {
            throw ConfigurationError(variable: "HERALD_TEST_END_SERVICE",
                                     message: "names no service (\(stages.joined().map(\.name).joined(separator: ", ")))")
        }
        return stages.map { stage in stage.map { service -> any Service in service.name == name ? EndedByTest(service) : service } }
    }

    package var name: String { base.name }
    package var shutdownTimeoutSeconds: Double? { base.shutdownTimeoutSeconds }
    package func prepare() throws { try base.prepare() }

    package func run() throws {
        DispatchQueue.global().asyncAfter(deadline: .now() + afterSeconds) { [base] in base.shutdown() }
        try base.run()
        if !asked.load(ordering: .relaxed) { throw Ended() }
    }

    package func shutdown() {
        asked.store(true, ordering: .relaxed)
        base.shutdown()
    }
}
