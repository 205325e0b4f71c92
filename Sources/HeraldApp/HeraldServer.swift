import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import HTTPServer
import Postgres

/// A running Herald: database pool, migrations applied, HTTP server listening.
/// Started by `herald serve` and by the integration tests (on port 0).
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
    package let components: [any Component]

    /// The port actually bound (useful with port 0).
    package var port: Int { http.port }

    /// Connects, migrates, and starts listening. Throws when the database is unreachable at start,
    /// a migration fails, or the address cannot be bound.
    package init(configuration: Configuration, logger: Logger) throws {
        guard let databaseURL = configuration.databaseURL else {
            throw ConfigurationError(variable: "DATABASE_URL", message: "is required")
        }
        let migrator = try Migrator(directory: Migration.locateDirectory(configured: configuration.migrationsDirectory))
        let openAPI = try OpenAPIDocument.load(configured: configuration.openAPIFile)
        let console = try ConsoleFiles.load(configured: configuration.consoleDirectory)
        let prepare = configuration.databasePoolMode == .session
        database = PostgresPool(configuration: .init(
            connectionString: databaseURL, size: configuration.databasePoolSize,
            acquireTimeoutSeconds: Double(configuration.databaseAcquireTimeoutMs) / 1000, prepareStatements: prepare))
        let applied = try database.withConnection { try migrator.migrate($0) }
        for migration in applied {
            logger.info("migration applied", ["version": .int(migration.version), "name": .string(migration.name)])
        }
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
            applicationName: "herald-delivery", prepareStatements: prepare))
        delivery = DeliveryLoop(database: deliveryDatabase, metrics: metrics, logger: logger,
                                    allowPrivateAddresses: configuration.deliveryAllowPrivate, caFile: configuration.deliveryCAFile)
        let notifications = NotificationListener(connectionString: listenURL, changes: changeWaiter, jobs: jobWaiter, delivery: delivery, logger: logger)
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
        // The workers first, then the listener; the long-poll waiters last, so that they are the
        // first stopped: their long polls are answered before the listener drains.
        components = [maintenance, fanout, digests, service.services.inboxRefresher, delivery,
                      Listener(http: http, drainTimeoutSeconds: Double(configuration.drainTimeoutSeconds)), notifications,
                      jobWaiter, changeWaiter]
        for (index, component) in components.enumerated() {
            do {
                try component.start()
            } catch {
                // the address cannot be bound: what started stops again, in reverse
                for started in components[..<index].reversed() { started.stop() }
                database.close()
                deliveryDatabase.close()
                throw error
            }
        }
        logger.info("listening", ["host": .string(configuration.listenHost), "port": .int(http.port),
                                  "threads": .int(configuration.threads), "schemaVersion": .int(migrator.latestVersion)])
    }

    /// Stops accepting, finishes requests in flight, then closes the database pool.
    ///
    /// In reverse start order up to the HTTP listener — waiting long polls answered (≤ 10 s for
    /// claims, ≤ 10 s for feeds), the notification listener (≤ 5 s), requests in flight drained
    /// (≤ `HERALD_DRAIN_TIMEOUT_SECONDS`) — then the background workers together, since none
    /// needs another: delivery (≤ 90 s: its deliverers finish their requests, ≤ 60 s each, in
    /// parallel), the inbox refresher (≤ 30 s), the fan-out chunk (≤ 30 s), maintenance (≤ 10 s).
    /// Worst case: 25 s + the drain timeout + 90 s (145 s with the default 30); one after
    /// another the workers alone could take 160 s. deploy/ sizes its stop budgets from this.
    package func shutdown() {
        service.services.logger.info("shutting down", ["inFlight": .int(http.inFlight)])
        let listener = components.firstIndex { $0 is Listener } ?? 0
        for component in components[listener...].reversed() { component.stop() }
        let workers = DispatchGroup()
        for component in components[..<listener] {
            DispatchQueue.global().async(group: workers) { component.stop() }
        }
        workers.wait()
        database.close()
        deliveryDatabase.close()
        service.services.logger.info("stopped")
    }
}

/// A part of a running Herald with a start and a stop.
package protocol Component: Sendable {
    func start() throws
    func stop()
}

extension FanoutWorker: Component {}
extension JobWaiter: Component {}
extension ChangeWaiter: Component {}
extension NotificationListener: Component {}
extension InboxRefresher: Component {}
extension Maintenance: Component {}
extension DigestCloser: Component {}
extension DeliveryLoop: Component {}

/// The HTTP server as a component: stopping it stops accepting and drains the requests in flight.
package struct Listener: Component {
    package let http: HTTPServer
    package let drainTimeoutSeconds: Double
    package func start() throws { try http.start() }
    package func stop() { http.shutdown(drainTimeoutSeconds: drainTimeoutSeconds) }
}
