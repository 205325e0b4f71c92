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
/// it is back, the waiters look for themselves. On Citus, where nothing can be notified, it looks
/// at the feed's newest items every 100 ms instead, and claims look for themselves.
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
    /// `HERALD_DB_MODE`: on Citus it looks instead of listening.
    package let databaseMode: DatabaseMode?

    package init(connectionString: String?, changes: ChangeWaiter, jobs: JobWaiter, delivery: DeliveryLoop? = nil,
                 databaseMode: DatabaseMode? = nil, logger: Logger) {
        self.connectionString = connectionString
        self.databaseMode = databaseMode
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
        var citus: Bool?
        var lastLook = ContinuousClock.now - .seconds(10)
        var seen = RecentChanges()
        listenLoop { connection in
            if citus == nil {
                citus = try DatabaseLayout.mode(connection, configured: databaseMode) == .citus
                if citus == true {
                    logger.info("on Citus: the change feed's long polls are woken by a look at new changes every 100 ms, claims look every 250 ms (docs/scaling.md)", [:])
                }
            }
            guard citus == true else { return .listen }
            // Citus: Herald's functions run on the workers, where no NOTIFY can be sent (two-phase
            // commit refuses it) and none would reach this listener. Look at the feed's newest
            // items instead: they are numbered at commit, so the last seconds cover a commit
            // still finishing; the ones seen already are skipped.
            if ContinuousClock.now - lastLook >= .milliseconds(100) {
                lastLook = ContinuousClock.now
                let users = try seen.look(connection)
                if !users.isEmpty { changes.changed(users) }
            }
            return .look(seconds: 0.05)
        }
        set(listening: false)
    }

    /// What a loop does between two waits on its connection.
    private enum Tick: Equatable {
        /// LISTEN for notifications (one PostgreSQL).
        case listen
        /// Wait this long and look again (Citus).
        case look(seconds: Double)
    }

    /// LISTENs until `shutdown()`, connecting again every second when the connection is lost;
    /// `tick` runs between waits on the connection and says how to wait.
    private func listenLoop(tick: (PostgresConnection) throws -> Tick) {
        var failures = 0
        func stopped() -> Bool { stopping.load(ordering: .relaxed) }
        while !stopped() {
            do {
                // a session of its own, never a transaction pooler's (see HeraldServer.init)
                let connection = try PostgresConnection(connectionString: connectionString ?? "", applicationName: "herald-listen",
                                                        settings: HeraldServer.sessionSettings(prepare: true))
                defer { connection.close() }
                try connection.execute(unsafeSQL: "LISTEN herald_changes; LISTEN herald_jobs")
                if failures > 0 { logger.info("notification listener connected again", [:]) }
                failures = 0
                var first = true
                while !stopped() {
                    let next = try tick(connection)
                    if first {
                        first = false
                        set(listening: true, jobs: next == .listen)
                        // What committed while nobody listened: everyone looks once.
                        changes.changedAll()
                        jobs.wake()
                        delivery?.wake()
                    }
                    switch next {
                    case .listen:
                        for notification in try connection.notifications(timeout: 0.5) { deliver(notification) }
                    case .look(let seconds):
                        usleepSeconds(seconds)
                    }
                }
            } catch {
                set(listening: false)
                changes.changedAll()
                if failures == 0 {
                    logger.warn("notification listener lost its connection; long polls look every second meanwhile",
                                ["error": .string(String(describing: error))])
                }
                failures += 1
                for _ in 0..<10 where !stopped() { usleepSeconds(0.1) }
            }
        }
    }

    /// Whether the waiters can rely on being woken: the feed's while this listener listens (or,
    /// on Citus, looks), the claims' and deliverers' only where jobs are notified (not on Citus).
    private func set(listening: Bool, jobs jobsNotified: Bool = true) {
        changes.listening.store(listening, ordering: .relaxed)
        jobs.listening.store(listening && jobsNotified, ordering: .relaxed)
        delivery?.listening.store(listening && jobsNotified, ordering: .relaxed)
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

/// The change-feed items of the last five seconds that a Citus listener has seen, so that each
/// wakes its user's long polls once.
private struct RecentChanges {
    /// How far back a look reaches: an item is numbered in its transaction's commit step, on the
    /// worker's clock, and becomes visible when the commit completes, a moment later.
    static let windowMs: Int64 = 5000
    private var seen: [String: Int64] = [:] // "app<US>uid<US>seq" → when it was numbered

    /// The users ("app<US>uid") with items not seen before.
    mutating func look(_ connection: PostgresConnection) throws -> [String] {
        let rows = try connection.query("""
            SELECT app, uid, seq, at, herald_now_ms() AS now FROM changes WHERE at >= herald_now_ms() - \(Self.windowMs)
            """)
        var users: [String] = []
        var now: Int64?
        for row in rows {
            let user = try row.decode("app", as: String.self) + "\u{1F}" + row.decode("uid", as: String.self)
            let key = user + "\u{1F}" + String(try row.decode("seq", as: Int64.self))
            if seen.updateValue(try row.decode("at", as: Int64.self), forKey: key) == nil { users.append(user) }
            now = try row.decode("now", as: Int64.self)
        }
        if let now { seen = seen.filter { $0.value >= now - Self.windowMs } }
        return users
    }
}
