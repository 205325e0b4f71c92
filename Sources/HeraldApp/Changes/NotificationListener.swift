import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import Postgres
import JSON
import Synchronization

/// One database connection per instance that LISTENs to `herald_changes` (a user's feed
/// changed: sql/functions/3_changes.sql) and `herald_jobs` (an app has new jobs), and wakes
/// the long polls that wait for them: `ChangeWaiter` and `JobWaiter`. NOTIFY reaches every
/// instance on the database, so a change committed by one instance wakes a feed waiting on
/// another. When the connection is lost it connects again every second; meanwhile, and once
/// it is back, the waiters look for themselves.
package final class NotificationListener: Sendable {
    /// nil: nothing to listen on (behind a transaction pooler without `HERALD_LISTEN_DATABASE_URL`);
    /// the waiters then look for themselves.
    package let connectionString: String?
    package let changes: ChangeWaiter
    package let jobs: JobWaiter
    /// Built-in delivery's deliverers, woken for their app's new jobs too.
    package let delivery: DeliveryLoop?
    package let logger: Logger
    private let stopping = Atomic<Bool>(false)
    /// Signalled by `shutdown()`: what `run()` waits for when there is nothing to listen on.
    private let stopSignal = DispatchSemaphore(value: 0)

    package init(connectionString: String?, changes: ChangeWaiter, jobs: JobWaiter, delivery: DeliveryLoop? = nil, logger: Logger) {
        self.connectionString = connectionString
        self.changes = changes
        self.jobs = jobs
        self.delivery = delivery
        self.logger = logger
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "notifications" }
    /// It looks at the stop every half second at most.
    package var shutdownTimeoutSeconds: Double? { 5 }

    /// Listens until `shutdown()`, connecting again every second when the connection is lost
    /// (a lost connection is never the end: the waiters look for themselves meanwhile). With
    /// nothing to listen on it only waits for the shutdown.
    package func run() {
        guard connectionString != nil else {
            stopSignal.wait()
            return
        }
        listen()
    }

    /// Asks `run()` to return (within half a second).
    package func shutdown() {
        stopping.store(true, ordering: .relaxed)
        stopSignal.signal()
    }

    private func listen() {
        var failures = 0
        while !stopping.load(ordering: .relaxed) {
            do {
                let connection = try PostgresConnection(connectionString: connectionString ?? "", applicationName: "herald-listen")
                defer { connection.close() }
                try connection.execute(unsafeSQL: "LISTEN herald_changes; LISTEN herald_jobs")
                if failures > 0 { logger.info("notification listener connected again", [:]) }
                failures = 0
                set(listening: true)
                // What committed while nobody listened: everyone looks once.
                changes.changedAll()
                jobs.wake()
                delivery?.wake()
                while !stopping.load(ordering: .relaxed) {
                    for notification in try connection.notifications(timeout: 0.5) { deliver(notification) }
                }
            } catch {
                set(listening: false)
                changes.changedAll()
                if failures == 0 {
                    logger.warn("notification listener lost its connection; long polls look every second meanwhile",
                                ["error": .string(String(describing: error))])
                }
                failures += 1
                for _ in 0..<10 where !stopping.load(ordering: .relaxed) { usleepSeconds(0.1) }
            }
        }
        set(listening: false)
    }

    private func set(listening: Bool) {
        changes.listening.store(listening, ordering: .relaxed)
        jobs.listening.store(listening, ordering: .relaxed)
        delivery?.listening.store(listening, ordering: .relaxed)
    }

    private func deliver(_ notification: PostgresNotification) {
        switch notification.channel {
        case "herald_changes":
            changes.changed(notification.payload.split(separator: "\u{1E}").map(String.init))
        case "herald_jobs":
            if notification.payload.isEmpty {
                jobs.wake()
                delivery?.wake()
            } else {
                jobs.wake(app: notification.payload)
                delivery?.wake(app: notification.payload)
            }
        default:
            break
        }
    }
}

private func usleepSeconds(_ seconds: Double) {
    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + seconds)
}
