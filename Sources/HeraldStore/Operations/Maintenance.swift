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

    /// One pass; returns how many rows were removed.
    @discardableResult
    package func runOnce() throws -> Int {
        var removed = 0
        // Finished jobs go with the dedupe records of their events.
        let days = retentionDays
        let targets: [(table: SQL, condition: SQL)] = [("events", "received_at < herald_now_ms() - \(days)::bigint * 86400000"),
                       ("rejected_events", "received_at < herald_now_ms() - \(days)::bigint * 86400000"),
                       ("job_rows", "state IN ('acked', 'cancelled') AND created_at < herald_now_ms() - \(days)::bigint * 86400000"),
                       // a block once each of its jobs is acked, cancelled or moved out (a row of its own)
                       ("job_blocks", """
                           created_at < herald_now_ms() - \(days)::bigint * 86400000 AND claimed = stop
                           AND (claimed = 0 OR EXISTS (SELECT 1 FROM job_block_marks k WHERE k.block = job_blocks.id
                                                          AND bit_count(k.acked | k.moved) = job_blocks.claimed))
                           """),
                       ("job_block_marks", "NOT EXISTS (SELECT 1 FROM job_blocks b WHERE b.id = job_block_marks.block)"),
                       ("job_leases", "NOT EXISTS (SELECT 1 FROM job_blocks b WHERE b.id = job_leases.block)"),
                       ("fanout_tasks", "done AND updated_at < herald_now_ms() - \(days)::bigint * 86400000"),
                       // a digest window once acted on, as long as its events are kept (explain reads it)
                       ("digest_windows", "closed_at IS NOT NULL AND ends_at < herald_now_ms() - \(days)::bigint * 86400000"),
                       // what member-action jobs say, once none of its jobs is left nor to come
                       ("member_actions", """
                           created_at < herald_now_ms() - \(days)::bigint * 86400000
                           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.app = member_actions.app AND j.message_id IS NULL
                                              AND j.event_source = member_actions.event_source
                                              AND j.event_id = member_actions.event_id)
                           AND NOT EXISTS (SELECT 1 FROM fanout_tasks t WHERE t.app = member_actions.app AND NOT t.done
                                              AND t.event_source = member_actions.event_source
                                              AND t.event_id = member_actions.event_id)
                           """)]
        for (table, condition) in targets {
            while true {
                let rows = try database.withConnection { connection in
                    try connection.query("""
                        DELETE FROM \(table) WHERE ctid IN (SELECT ctid FROM \(table) WHERE \(condition) LIMIT 5000)
                        """)
                }
                removed += rows.affectedRows
                if rows.affectedRows < 5000 { break }
            }
        }
        removed += try purgeTombstones()
        removed += try purgeChanges()
        return removed
    }

    /// Change-feed entries (SPEC §14) older than their app's `changeRetentionSeconds`, app by
    /// app in batches of 5,000 (the block range index on `at` finds them). A minute more than the
    /// retention: a cursor is refused (410) from the retention on, so none can still reach them.
    package func purgeChanges() throws -> Int {
        var removed = 0
        let apps = try database.withConnection { connection in
            try connection.query("""
                SELECT a.id, coalesce((s.settings ->> 'changeRetentionSeconds')::bigint, \(AppSettings.defaults.changeRetentionSeconds)) AS retention
                  FROM apps a LEFT JOIN app_settings s ON s.app = a.id
                """).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self)) }
        }
        for (app, retention) in apps {
            while true {
                let rows = try database.withConnection { connection in
                    try connection.query("""
                        DELETE FROM changes WHERE ctid IN (
                            SELECT ctid FROM changes WHERE at < herald_now_ms() - (\(retention)::bigint + 60) * 1000 AND app = \(app) LIMIT 5000)
                        """)
                }
                removed += rows.affectedRows
                if rows.affectedRows < 5000 { break }
            }
        }
        return removed
    }

    /// Removed pins and saves (SPEC §12) older than their app's `changeRetentionSeconds`, in
    /// batches of 5,000. Until then an unpin or unsave outranks an older pin or save that arrives
    /// late; after it, such a late event applies again.
    package func purgeTombstones() throws -> Int {
        var removed = 0
        let tables: [(table: SQL, flag: SQL)] = [("message_pins", "pinned"), ("message_saves", "saved"), ("conversation_pins", "pinned")]
        for (table, flag) in tables {
            while true {
                let rows = try database.withConnection { connection in
                    try connection.query("""
                        DELETE FROM \(table) WHERE ctid IN (
                            SELECT r.ctid FROM \(table) r LEFT JOIN app_settings s ON s.app = r.app
                             WHERE NOT r.\(flag)
                               AND r.at < herald_now_ms() - coalesce((s.settings ->> 'changeRetentionSeconds')::bigint, \(AppSettings.defaults.changeRetentionSeconds)) * 1000
                             LIMIT 5000)
                        """)
                }
                removed += rows.affectedRows
                if rows.affectedRows < 5000 { break }
            }
        }
        return removed
    }
}

