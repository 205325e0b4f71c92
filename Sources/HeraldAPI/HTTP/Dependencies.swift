import HeraldDomain
import HeraldStore
import Postgres
import Secrets

/// The long-lived parts every handler may use.
package struct Dependencies: Sendable {
    package let configuration: Configuration
    package let database: PostgresPool
    package let logger: Logger
    package let migrator: Migrator
    package let tenancy: TenancyStore
    /// Signs cursors that must not be altered (the inbox's): derived from the admin token, so
    /// every instance of a deployment agrees.
    package let cursorKey: [UInt8]
    /// Produces large-group jobs in the background; ingest wakes it.
    package let fanout: FanoutWorker
    /// Holds long-poll claims; ingest and `NotificationListener` wake it.
    package let jobWaiter: JobWaiter
    /// Holds long polls of the change feed; `NotificationListener` wakes it.
    package let changeWaiter: ChangeWaiter
    /// Counters and histograms for `GET /metrics`.
    package let metrics: Metrics
    /// Built-in delivery (SPEC §13.3); ingest wakes it, the settings routes refresh it.
    package let delivery: any DeliveryControl
    /// Refreshes busy threads' inbox sort keys in the background; ingest wakes it.
    package let inboxRefresher: InboxRefresher
    /// Applies concurrent ingest requests on the same threads in one transaction.
    package let ingestCombiner: IngestCombiner
    /// The document served at `GET /openapi.json`.
    package let openAPI: OpenAPIDocument
    /// The files of the operator console served at `/console/`.
    package let console: ConsoleFiles

    package init(configuration: Configuration, database: PostgresPool, logger: Logger, migrator: Migrator, fanout: FanoutWorker,
                jobWaiter: JobWaiter, changeWaiter: ChangeWaiter, delivery: any DeliveryControl, metrics: Metrics, inboxRefresher: InboxRefresher, openAPI: OpenAPIDocument, console: ConsoleFiles) {
        self.openAPI = openAPI
        self.console = console
        self.metrics = metrics
        self.inboxRefresher = inboxRefresher
        self.ingestCombiner = IngestCombiner(database: database, lanes: configuration.ingestLanes)
        self.fanout = fanout
        self.jobWaiter = jobWaiter
        self.changeWaiter = changeWaiter
        self.delivery = delivery
        self.configuration = configuration
        self.database = database
        self.logger = logger
        self.migrator = migrator
        self.tenancy = TenancyStore()
        self.cursorKey = Secrets.sha256("herald cursor key:" + (configuration.adminToken ?? ""))
    }
}

/// Who waits for new jobs — long-poll claims and built-in delivery — and the count of jobs made.
package struct JobsProduced: Sendable {
    let metrics: Metrics
    let jobWaiter: JobWaiter
    let delivery: any DeliveryControl

    package init(_ all: Dependencies) {
        (metrics, jobWaiter, delivery) = (all.metrics, all.jobWaiter, all.delivery)
    }

    /// Jobs were committed outside ingest (a read's clear jobs): count them and wake the waiters.
    package func callAsFunction(_ count: Int, app: String) {
        guard count > 0 else { return }
        metrics.add(.jobsProduced, count)
        jobWaiter.wake(app: app)
        delivery.wake(app: app)
    }
}

/// What the API asks of built-in delivery, which runs in the app above it: wake an app's
/// deliverer for new jobs, read changed settings, and its pool for the gauges.
package protocol DeliveryControl: Sendable {
    /// New jobs of `app` may exist.
    func wake(app: String)
    /// An app's delivery settings changed.
    func refresh()
    /// Built-in delivery's own connections.
    var database: PostgresPool { get }
}
