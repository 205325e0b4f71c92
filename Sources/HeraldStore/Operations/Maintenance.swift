import HeraldDomain
import Dispatch
import Postgres
import Synchronization

/// Background housekeeping on a thread of its own (never Swift's cooperative pool): forgets
/// dedupe records, rejected events, finished jobs and fan-out tasks older than the retention,
/// in small batches.
package final class Maintenance: Sendable {
    package let retentionDays: Int
    package let database: PostgresPool
    package let logger: Logger
    package let intervalSeconds: Double
    private let loop = BackgroundLoop(label: "herald.maintenance", qos: .utility, firstWait: .rest(seconds: 60))

    package init(database: PostgresPool, retentionDays: Int, logger: Logger, intervalSeconds: Double = 3600) {
        self.database = database
        self.retentionDays = retentionDays
        self.logger = logger
        self.intervalSeconds = intervalSeconds
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "maintenance" }
    /// A pass in progress finishes first.
    package var shutdownTimeoutSeconds: Double? { 10 }

    /// Runs until `shutdown()`: a pass a minute after start, then every `intervalSeconds`; a pass
    /// that fails is logged and the next one comes at its time.
    package func run() {
        loop.run { [self] in
            do {
                let removed = try runOnce()
                if removed > 0 { logger.info("maintenance", ["removed": .int(removed)]) }
            } catch {
                logger.warn("maintenance failed", ["error": .string(String(describing: error))])
            }
            return .rest(seconds: intervalSeconds)
        }
    }

    /// Asks `run()` to return; a pass in progress finishes first.
    package func shutdown() { loop.shutdown() }

    /// One pass; returns how many rows were removed. Each kind of row is looked for once across
    /// all apps (a read), then deleted app by app: every deleting statement names one app, so that
    /// on Citus it runs on the worker that holds the app (docs/scaling.md), and one app's backlog
    /// goes in batches without holding up the others for long.
    @discardableResult
    package func runOnce() throws -> Int {
        var removed = 0
        let days = retentionDays
        let expired: SQL = "herald_now_ms() - \(days)::bigint * 86400000"
        let retention = Self.retention
        // Finished jobs go with the dedupe records of their events.
        let simple: [(table: SQL, condition: (SQL) -> SQL)] = [
            ("events", { _ in "received_at < \(expired)" }),
            ("rejected_events", { _ in "received_at < \(expired)" }),
            ("job_rows", { _ in "state IN ('acked', 'cancelled') AND created_at < \(expired)" }),
            ("fanout_tasks", { _ in "done AND updated_at < \(expired)" }),
            // a digest window once acted on, as long as its events are kept (explain reads it)
            ("digest_windows", { _ in "closed_at IS NOT NULL AND ends_at < \(expired)" }),
            // removed pins and saves (SPEC §12): until then an unpin or unsave outranks an older
            // pin or save that arrives late; after it, such a late event applies again
            ("message_pins", { "NOT pinned AND at < herald_now_ms() - \(retention($0)) * 1000" }),
            ("message_saves", { "NOT saved AND at < herald_now_ms() - \(retention($0)) * 1000" }),
            ("conversation_pins", { "NOT pinned AND at < herald_now_ms() - \(retention($0)) * 1000" }),
            // change-feed entries (SPEC §14)
            ("changes", Self.changesExpired),
        ]
        for (table, condition) in simple {
            for app in try apps(in: table, where: condition("t.app")) {
                removed += try delete(app: app, from: table, where: condition("\(app)"))
            }
        }
        // A block once each of its jobs is acked, cancelled or moved out (a row of its own), and
        // then its marks and lease ranges. (Each subquery names the app itself: Citus routes a
        // statement only when it sees the app on every table.)
        for app in try apps(in: "job_blocks", where: "created_at < \(expired) AND claimed = stop") {
            let blocks = try delete(app: app, from: "job_blocks", where: """
                created_at < \(expired) AND claimed = stop
                AND (claimed = 0 OR EXISTS (SELECT 1 FROM job_block_marks k WHERE k.app = \(app) AND k.block = t.id
                                               AND bit_count(k.acked | k.moved) = t.claimed))
                """)
            removed += blocks
            if blocks > 0 {
                removed += try delete(app: app, from: "job_block_marks",
                                      where: "NOT EXISTS (SELECT 1 FROM job_blocks b WHERE b.app = \(app) AND b.id = t.block)")
                removed += try delete(app: app, from: "job_leases",
                                      where: "NOT EXISTS (SELECT 1 FROM job_blocks b WHERE b.app = \(app) AND b.id = t.block)")
            }
        }
        // What member-action jobs say, once none of its jobs is left nor to come.
        for app in try apps(in: "member_actions", where: "created_at < \(expired)") {
            removed += try delete(app: app, from: "member_actions", where: """
                created_at < \(expired)
                AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.app = \(app) AND j.message_id IS NULL
                                   AND j.event_source = t.event_source AND j.event_id = t.event_id)
                AND NOT EXISTS (SELECT 1 FROM fanout_tasks f WHERE f.app = \(app) AND NOT f.done
                                   AND f.event_source = t.event_source AND f.event_id = t.event_id)
                """)
        }
        return removed
    }

    /// The apps with rows `t` of `table` that match `condition` (one read across all apps).
    private func apps(in table: SQL, where condition: SQL) throws -> [String] {
        try database.withConnection { connection in
            try connection.query("SELECT DISTINCT t.app FROM \(table) t WHERE \(condition)").map { try $0.decode(0, as: String.self) }
        }
    }

    /// An app's `changeRetentionSeconds`; `app` is the app's SQL (a column, or a bound value: a
    /// statement that deletes names its app itself, for Citus).
    private static func retention(_ app: SQL) -> SQL {
        """
        coalesce((SELECT (s.settings ->> 'changeRetentionSeconds')::bigint FROM app_settings s WHERE s.app = \(app)),
                 \(AppSettings.defaults.changeRetentionSeconds))
        """
    }

    /// Change-feed entries (SPEC §14) a minute past their app's retention: a cursor is refused
    /// (410) from the retention on, so none can still reach them.
    private static func changesExpired(_ app: SQL) -> SQL {
        "at < herald_now_ms() - (\(retention(app)) + 60) * 1000"
    }

    /// The change-feed entries of every app past its retention: what `runOnce` removes from `changes`.
    package func purgeChanges() throws -> Int {
        try apps(in: "changes", where: Self.changesExpired("t.app")).reduce(0) {
            $0 + (try delete(app: $1, from: "changes", where: Self.changesExpired("\($1)")))
        }
    }

    /// Deletes the rows `t` of `app` in `table` that match `condition`, 5,000 at a time.
    private func delete(app: String, from table: SQL, where condition: SQL) throws -> Int {
        var removed = 0
        while true {
            let rows = try database.withConnection { connection in
                try connection.query("""
                    DELETE FROM \(table) WHERE app = \(app) AND ctid IN (SELECT t.ctid FROM \(table) t WHERE t.app = \(app) AND \(condition) LIMIT 5000)
                    """)
            }
            removed += rows.affectedRows
            if rows.affectedRows < 5000 { return removed }
        }
    }
}

