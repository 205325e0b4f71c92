import HeraldDomain
import Postgres
import Synchronization

/// Has the pools' connections plan their statements again when a table has doubled in size
/// (`PostgresPool.replan()`), after gathering that table's statistics (`ANALYZE`).
///
/// Herald's statements run with generic plans (`GenericPlans`, and its PL/pgSQL functions), which
/// a connection keeps until an `ANALYZE` of a table they read. A plan made while a table was a few
/// pages reads it whole, even where a key is given (a scan of a few pages costs less than an
/// index), and keeps reading it whole as it grows: on a new database, W1's first 60,000 replies
/// ran on the plans made for its empty tables until the autovacuum analysed them (the catch-up
/// look-up scanned all 5,000 threads for each of a round's 340 keys, 175 ms a round). Sizes are
/// what the planner reads at planning time, so a table that doubled is what makes a plan stale;
/// a table's size at most doubles a few dozen times in its life, so this costs a few re-plannings
/// per connection, and none on a database whose size holds. Behind a pooler in transaction mode
/// the `DISCARD PLANS` reaches whichever server session the pooler picks; the `ANALYZE` still
/// makes every session plan that table's statements again.
package final class PlanRefresher: Service {
    /// The pool whose connection reads the sizes and analyses.
    package let database: PostgresPool
    /// Every pool whose connections plan again (`database` among them).
    package let pools: [PostgresPool]
    package let logger: Logger
    package let intervalSeconds: Double
    /// A table makes plans stale once it has doubled and reached twice this (about sixteen pages).
    package static let smallTableBytes: Int64 = 128 * 1024
    private let loop = BackgroundLoop(label: "herald.plans", qos: .utility)
    /// Each table's size when the plans were last made again (or at the first look).
    private let planned = Mutex<[String: Int64]?>(nil)

    package init(database: PostgresPool, others: [PostgresPool] = [], logger: Logger, intervalSeconds: Double = 5) {
        self.database = database
        self.pools = [database] + others
        self.logger = logger
        self.intervalSeconds = intervalSeconds
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "plans" }
    package var shutdownTimeoutSeconds: Double? { 10 }

    /// Looks every `intervalSeconds` until `shutdown()`; a look that fails (the database away) is
    /// tried again at the next.
    package func run() {
        loop.run { [self] in
            do {
                try check()
            } catch {
                logger.debug("plan refresher: could not read the tables' sizes", ["error": .string(String(describing: error))])
            }
            return .rest(seconds: intervalSeconds)
        }
    }

    package func shutdown() { loop.shutdown() }

    /// One look at the sizes of the tables Herald's role owns (the only ones it may analyse: a
    /// refused `ANALYZE` is a warning, not an error); when one has at least doubled since the plans
    /// were last made for it (and reached twice `smallTableBytes`), it is analysed and every
    /// pooled connection plans again. Returns the tables that grew.
    @discardableResult
    package func check() throws -> [String] {
        let sizes = try database.withTransaction { connection in
            // a table locked by a migration is not waited for long: the next look reads it
            try connection.send("SET LOCAL lock_timeout = '1s'")
            return try connection.query("""
                SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_class c
                 WHERE c.relkind = 'r' AND c.relnamespace = (SELECT n.oid FROM pg_namespace n WHERE n.nspname = current_schema())
                   AND pg_has_role(c.relowner, 'USAGE')
                """).map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int64.self)) }
        }
        let grown = planned.withLock { planned -> [String] in
            guard let before = planned else {
                planned = Dictionary(sizes, uniquingKeysWith: max)
                return []
            }
            let grown = sizes.filter { $0.1 >= 2 * max(before[$0.0] ?? 0, Self.smallTableBytes) }
            // only the grown tables' marks move: a table that shrank since (a queue the autovacuum
            // truncated) keeps its higher mark, so each table re-plans at most once per doubling
            // of the largest size it had
            for (table, size) in grown { planned?[table] = size }
            return grown.map(\.0).sorted()
        }
        guard !grown.isEmpty else { return [] }
        // Their statistics first (the autovacuum's come up to a minute later): a partial index
        // analysed while empty looks empty to the planner until then, however large it grew
        // (W1: the index of replies chosen for look-ups by id, every reply read for each).
        // SKIP_LOCKED: a table an autovacuum or another instance is analysing is left to it.
        let analysed = try database.withConnection { connection in
            grown.filter { table in
                do {
                    try connection.execute(unsafeSQL: "ANALYZE (SKIP_LOCKED) \"" + table.replacing("\"", with: "\"\"") + "\"")
                    return true
                } catch {
                    logger.debug("plan refresher: could not analyse a table", ["table": .string(table), "error": .string(String(describing: error))])
                    return false
                }
            }
        }
        for pool in pools { pool.replan() }
        logger.info("tables grew: statements planned again", ["tables": .array(grown.map { .string($0) }),
                                                              "analysed": .array(analysed.map { .string($0) })])
        return grown
    }
}
