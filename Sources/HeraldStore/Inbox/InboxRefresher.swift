import HeraldDomain
import Dispatch
import Glibc
import Postgres
import Synchronization

/// Brings the inbox sort key (`subscriptions.activity_at`) of busy threads' subscribers up to date
/// in the background, on a thread of its own (docs/inbox.md).
///
/// A reply no longer rewrites every subscriber's row: ingest lists its thread in `stale_threads`,
/// and the inbox reads such threads' rows with the thread's own activity until this loop has
/// refreshed them. Each round takes the stale threads it can lock at once (the same thread and
/// group locks as ingest, tried without waiting), updates the next slice of each one's
/// subscriber rows (`sliceRows`, in uid order) in one statement, and clears the threads whose
/// pass is done; a thread that got replies during its pass starts another. The lock is held for
/// one slice, so a reply to a thread of 100,000 subscribers waits tens of milliseconds at most,
/// not the seconds the whole thread takes. Replies that arrive between two rounds cost one row
/// update per subscriber together, however many they are. Several instances share the work.
///
/// A busy thread waits: a round takes a thread once it has been quiet for `quietMilliseconds`
/// (its row unchanged), or once `deferMilliseconds` have passed since it became stale or since
/// its last refresh step (`due`; why: docs/inbox.md).
package final class InboxRefresher: Sendable {
    package let database: PostgresPool
    package let logger: Logger
    /// Least time between two rounds: more replies are coalesced into one update per row.
    package let spacingMilliseconds: Int
    package let batch: Int
    /// Rows of one thread refreshed in one transaction (under the thread's lock, which replies to
    /// the thread wait for): a thread with more subscribers is refreshed over several rounds.
    package let sliceRows: Int
    /// How long a thread's row must be unchanged before a round takes it.
    package let quietMilliseconds: Int
    /// How long a busy thread waits at most, from when it became stale or its last refresh step.
    package let deferMilliseconds: Int
    private let loop = BackgroundLoop(label: "herald.inbox-refresh", qos: .utility)

    package init(database: PostgresPool, logger: Logger, spacingMilliseconds: Int = 1000, batch: Int = 500, sliceRows: Int = 1000,
                 quietMilliseconds: Int = 2000, deferMilliseconds: Int = 10_000) {
        self.database = database
        self.logger = logger
        self.spacingMilliseconds = spacingMilliseconds
        self.batch = batch
        self.sliceRows = sliceRows
        self.quietMilliseconds = quietMilliseconds
        self.deferMilliseconds = deferMilliseconds
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "inbox-refresh" }
    package var shutdownTimeoutSeconds: Double? { 30 }

    /// Refreshes rounds until `shutdown()`; a round that fails is logged and the next one comes.
    package func run() {
        loop.run { [self] in
            var round = (refreshed: 0, deferred: false)
            do {
                round = try runOnce()
            } catch let error as PostgresError where error.isUnavailable || error.code == .poolClosed {
                round = (0, false)
            } catch {
                logger.warn("inbox refresh failed", ["error": .string(String(describing: error))])
            }
            // After a round, or with busy threads left for later, the spacing whatever wakes it
            // (more replies coalesce into one update per row; ingest's wakes do not make it look
            // again at threads it left); idle, until ingest lists a thread or a second (other
            // instances' threads).
            return round.refreshed > 0 || round.deferred ? .rest(seconds: Double(spacingMilliseconds) / 1000) : .idle(seconds: 1)
        }
    }

    /// Ingest listed threads: look soon (wakes that come together count once).
    package func wake() { loop.wake() }

    /// Asks `run()` to return after the round in progress.
    package func shutdown() { loop.shutdown() }

    /// The stale threads a round takes, by app, oldest first: quiet ones, and busy ones that
    /// have waited long enough (`threads`); `deferred` when busy ones were left for later.
    /// `waiting: false` takes busy threads too, and `app` looks at one app's (tests).
    package func due(waiting: Bool = true, app: String? = nil) throws -> (threads: [String: [(thread: String, group: String?)]], deferred: Bool) {
        let quiet = waiting ? quietMilliseconds : 0, deferred = waiting ? deferMilliseconds : 0
        let only: SQL = app.map { "WHERE st.app = \($0)" } ?? ""
        let stale = try database.withTransaction { connection in
            // Each stale thread's row through its key, whatever the planner believes of
            // stale_threads: a table it has no statistics for yet (a new database, the first
            // rounds) it takes for ~500 rows, and it then read every thread of every app into a
            // hash join, each round (`PlanningTests.roundAfterGrowth` saw it, once in a few runs).
            // (On Citus the workers plan their shards' joins with their own statistics.)
            try connection.send("SET LOCAL enable_hashjoin = off")
            try connection.send("SET LOCAL enable_mergejoin = off")
            return try connection.query("""
                SELECT x.* FROM (
                    SELECT st.app, st.thread_id, t.group_id, st.since,
                           t.updated_at IS NULL OR t.updated_at <= herald_now_ms() - \(quiet) OR st.since <= herald_now_ms() - \(deferred) AS due
                      FROM stale_threads st
                      LEFT JOIN threads t ON t.app = st.app AND t.parent_id = st.thread_id
                      \(only)) x
                 ORDER BY x.due DESC, x.since LIMIT \(batch)
                """)
        }
        var byApp: [String: [(thread: String, group: String?)]] = [:]
        var left = false
        for row in stale {
            guard try row.decode("due", as: Bool.self) else {
                left = true
                continue
            }
            byApp[try row.decode("app", as: String.self), default: []].append((try row.decode("thread_id"), try row.decode("group_id")))
        }
        return (byApp, left)
    }

    /// One round: how many threads were refreshed (`due` says which are taken), and whether
    /// busy ones were left for later.
    @discardableResult
    package func runOnce(waiting: Bool = true) throws -> (refreshed: Int, deferred: Bool) {
        let (byApp, deferred) = try due(waiting: waiting)
        guard !byApp.isEmpty else { return (0, deferred) }
        var refreshed = 0
        for (app, threads) in byApp {
            refreshed += try database.withTransaction { connection -> Int in
                // The thread exclusively and its group shared, as ingest takes them; threads whose
                // locks are busy wait for the next round.
                let locked = try connection.query("""
                    SELECT x.thread FROM unnest(\(threads.map(\.thread))::text[], \(threads.map(\.group))::text[]) AS x(thread, group_id)
                     WHERE pg_try_advisory_xact_lock(hashtextextended(\(app) || ':t:' || x.thread, 0))
                       AND (x.group_id IS NULL OR pg_try_advisory_xact_lock_shared(hashtextextended(\(app) || ':g:' || x.group_id, 0)))
                    """).map { try $0.decode(0, as: String.self) }
                guard !locked.isEmpty else { return 0 }
                // the next slice of each thread's rows; a thread leaves stale_threads when its pass is done
                try connection.query("SELECT herald_refresh_thread_rows(\(app), \(locked), \(sliceRows))")
                return locked.count
            }
        }
        return (refreshed, deferred)
    }
}
