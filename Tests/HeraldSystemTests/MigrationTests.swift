import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Postgres
import Synchronization
@testable import HeraldTestSupport
import Testing

@Suite("Migrations", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct MigrationTests {
    /// A fresh, empty database in the test cluster, dropped afterwards.
    func withFreshDatabase(_ body: (String) throws -> Void) throws {
        try TestEnvironment.shared().withDatabaseOfItsOwn(prefix: "mig", body)
    }

    func migrations() throws -> [Migration] {
        try Migration.load(directory: repositoryRoot + "/sql")
    }

    @Test("the sql folder is found beside the binary and ordered by version")
    func load() throws {
        let all = try migrations()
        #expect(all.first?.version == 1)
        #expect(all.map(\.version) == all.map(\.version).sorted())
        #expect(Migration.locateDirectory(configured: nil).hasSuffix("/sql"))
    }

    @Test("running twice applies each migration once")
    func twice() throws {
        try withFreshDatabase { url in
            let migrator = Migrator(migrations: try migrations())
            let connection = try PostgresConnection(connectionString: url)
            #expect(try migrator.appliedVersion(connection) == 0)
            #expect(try migrator.migrate(connection).count == migrator.migrations.count)
            #expect(try migrator.migrate(connection).isEmpty)
            #expect(try migrator.appliedVersion(connection) == migrator.latestVersion)
            let recorded = try connection.query("SELECT count(*) FROM schema_migrations")
            #expect(try recorded[0].decode(0, as: Int.self) == migrator.migrations.count)
        }
    }

    @Test("four instances migrating at once: each migration applied exactly once, all succeed")
    func concurrent() throws {
        try withFreshDatabase { url in
            let migrator = Migrator(migrations: try migrations())
            let applied = Mutex<[Int]>([])
            let failures = Mutex<[String]>([])
            let group = DispatchGroup()
            for _ in 0..<4 {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    do {
                        let connection = try PostgresConnection(connectionString: url)
                        let done = try migrator.migrate(connection)
                        applied.withLock { $0 += done.map(\.version) }
                    } catch {
                        failures.withLock { $0.append(String(describing: error)) }
                    }
                }
            }
            group.wait()
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(applied.withLock { $0 }.sorted() == migrator.migrations.map(\.version))
        }
    }

    @Test("no sequence is unlogged: a promoted standby reads an unlogged sequence as zeros (every ingest failed after a failover)")
    func noUnloggedSequences() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations()).migrate(connection)
            let unlogged = try connection.query("SELECT relname FROM pg_class WHERE relkind = 'S' AND relpersistence = 'u'")
            #expect(try unlogged.map { try $0.decode(0, as: String.self) } == [])
        }
    }

    @Test("the migration lock is a transaction lock: nothing is held between steps or after the run")
    func transactionLock() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations()).migrate(connection)
            // A session lock would outlive its transaction; behind a transaction pooler its
            // unlock could run on another server connection and leave it held for good.
            let held = try connection.query("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
            #expect(try held[0].decode(0, as: Int.self) == 0)
            // While another transaction holds the lock, a runner waits instead of applying.
            let holder = try PostgresConnection(connectionString: url)
            try holder.query("BEGIN")
            try holder.query("SELECT pg_advisory_xact_lock(\(Int64(0x4845_5241_4C44)))")
            let waiting = try PostgresConnection(connectionString: url)
            try waiting.query("SET lock_timeout = '200ms'")
            #expect(throws: PostgresError.self) { try Migrator(migrations: try migrations()).migrate(waiting) }
            try holder.query("ROLLBACK")
            #expect(try Migrator(migrations: try migrations()).migrate(waiting).isEmpty)
        }
    }

    @Test("a migration file edited after it was applied is refused")
    func checksum() throws {
        try withFreshDatabase { url in
            let original = try migrations()
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: original).migrate(connection)
            var edited = original
            edited[0] = Migration(version: original[0].version, name: original[0].name, sql: original[0].sql + "\n-- edited")
            #expect(throws: MigrationError.self) { try Migrator(migrations: edited).migrate(connection) }
        }
    }

    @Test("a failing migration leaves no trace and no record")
    func failingMigration() throws {
        try withFreshDatabase { url in
            let broken = try migrations() + [Migration(version: 9999, name: "9999_broken",
                                                        sql: "CREATE TABLE half_done (x int); SELECT no_such_function();")]
            let connection = try PostgresConnection(connectionString: url)
            #expect(throws: PostgresError.self) { try Migrator(migrations: broken).migrate(connection) }
            let table = try connection.query("SELECT to_regclass('half_done') IS NULL")
            #expect(try table[0].decode(0, as: Bool.self))
            let recorded = try connection.query("SELECT count(*) FROM schema_migrations WHERE version = 9999")
            #expect(try recorded[0].decode(0, as: Int.self) == 0)
        }
    }

    /// Plans on a new group before any ANALYZE (sql/0031): a look-up of one member must use the
    /// primary key with the uid in its index condition. With 0007's byte-order index, which also
    /// starts with (app, group_id), the planner took that one and filtered the whole group for
    /// each member: the inbox refresh of a 500-member thread read 250,000 rows under its lock.
    /// And a walk in byte order must read its chunk from its own index, without a sort.
    @Test("without statistics, a one-member look-up keeps to the primary key; a group walk in a generic plan starts at its bound in its index")
    func plansWithoutStatistics() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations()).migrate(connection)
            try connection.queryOnce("""
                INSERT INTO group_members (app, group_id, uid, joined_at)
                SELECT 'a', 'g', 'u' || lpad(i::text, 4, '0'), 1 FROM generate_series(1, 2000) i
                """)
            let analyzed = try connection.queryOnce("SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables WHERE relname = 'group_members'")
            #expect(try analyzed[0].decode(0, as: Bool.self), "the table must be without statistics for this test to mean anything")

            func plan(_ sql: SQL) throws -> String {
                try connection.queryOnce("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql).map { try $0.decode(0, as: String.self) }
                    .joined(separator: "\n")
            }
            // the membership probe of herald_refresh_thread_rows and herald_refresh_inbox, per member
            let lookup = try plan("""
                SELECT count(*) FROM (SELECT 'u' || lpad(i::text, 4, '0') AS uid FROM generate_series(1, 500) i) s
                 WHERE coalesce((SELECT g.joined_at > coalesce(g.removed_at, -1) FROM group_members g
                                  WHERE g.app = 'a' AND g.group_id = 'g' AND g.uid = s.uid), false)
                """)
            #expect(lookup.contains("group_members_pkey") && !lookup.contains("Rows Removed by Filter"), "\(lookup)")
            // the fan-out's walk of a chunk (Fanout.groupWalk) in a generic plan, as a prepared
            // statement gets after five runs: its start must bound the index scan, not filter it
            try connection.queryOnce("SET plan_cache_mode = force_generic_plan")
            try connection.queryOnce("""
                PREPARE walk(text) AS SELECT g.uid FROM group_members g
                 WHERE \(Fanout.groupWalk("g", group: "'g'", after: "\(unsafeRaw: "$1")", app: "'a'")) AND g.joined_at > coalesce(g.removed_at, -1)
                 ORDER BY g.uid COLLATE "C" LIMIT 100
                """)
            let walk = try plan("EXECUTE walk('u1900')")
            #expect(walk.contains("rows=100 "), "\(walk)")
            #expect(!walk.contains("Rows Removed by Filter"), "the walk read the members before its start: \(walk)")
            #expect(walk.contains("group_members_walk") && !walk.contains("Sort"), "\(walk)")
        }
    }

    /// The routing query asks whether a message's group is large (`EventJobs.isLarge`) in a
    /// generic plan, as all of ingest's statements: planned for any threshold, the count of a
    /// group's members up to it became a scan of every group's members (60 ms a group on a table
    /// of 850,000: a round of 100 replies in 95 groups took 5.8 s).
    @Test("in a generic plan, the large-group probe reads its group's members through the walk's index")
    func largeGroupProbe() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations(), functions: try Migration.loadFunctions(directory: repositoryRoot + "/sql")).migrate(connection)
            try connection.queryOnce("""
                INSERT INTO group_members (app, group_id, uid, joined_at)
                SELECT 'a', 'g' || (i % 400), 'u' || i, 1 FROM generate_series(1, 40000) i
                """)
            try connection.queryOnce("ANALYZE group_members")
            try connection.queryOnce("SET plan_cache_mode = force_generic_plan")
            // the probe as ingest sends it, its app a parameter ($1…), the groups and the threshold after
            let probe: SQL = """
                SELECT x.g FROM unnest($9::text[]) AS x(g)
                 WHERE \(EventJobs.isLarge(group: "x.g", threshold: "\(unsafeRaw: "$10::int")", app: "a"))
                """
            #expect(probe.parameters.count < 9)
            let types = Array(repeating: "text", count: 8) + ["text[]", "int"]
            try connection.queryOnce(SQL(unsafeRaw: "PREPARE large(\(types.joined(separator: ", "))) AS \(probe.text)"))
            let app = Array(repeating: "'a'", count: 8).joined(separator: ", ")
            let plan = try connection.queryOnce(SQL(unsafeRaw: "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE large(\(app), ARRAY['g7', 'g8'], 50)"))
                .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
            #expect(plan.contains("group_members_walk") && !plan.contains("Seq Scan") && !plan.contains("Rows Removed by Filter"), "\(plan)")
            #expect(try connection.queryOnce(SQL(unsafeRaw: "EXECUTE large(\(app), ARRAY['g7', 'g8'], 99)")).count == 2)
            #expect(try connection.queryOnce(SQL(unsafeRaw: "EXECUTE large(\(app), ARRAY['g7', 'g8'], 100)")).isEmpty)
        }
    }

    /// Ingest's first look-up (`IngestStore.threadLookup`) in a generic plan, as a connection
    /// plans it after five runs: `threads.parent_id = ANY (…)` was planned as a scan of the
    /// app's every thread by its app alone, filtered by the ids (W1: 8 ms before each batch's
    /// locks with 5,000 threads). Each message and thread must be read through its key.
    @Test("in a generic plan, ingest's look-up of threads and replies reads each through its key")
    func threadLookup() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations(), functions: try Migration.loadFunctions(directory: repositoryRoot + "/sql")).migrate(connection)
            // W1's shape: an app of 1,000 threads beside another of one
            for (app, threads) in [("a", 1000), ("b", 1)] {
                try connection.queryOnce("""
                    INSERT INTO threads (app, parent_id, conversation_id, receiver_type, group_id, parent_seen, reply_count, updated_at)
                    SELECT \(app), 'p' || i, 'group_g', 'group', 'g', true, 1, 1 FROM generate_series(1, \(threads)) i
                    """)
            }
            try connection.queryOnce("ANALYZE threads")
            try connection.queryOnce("SET plan_cache_mode = force_generic_plan")
            // prepared as ingest sends it (the parameters' types from their use), run with its own values
            let lookup = IngestStore.threadLookup(app: "a", lookup: ["r1", "r2"], hosts: ["p7", "p8", "none"])
            try connection.queryOnce(SQL(unsafeRaw: "PREPARE lookup AS \(lookup.text)"))
            let values = lookup.parameters.map { "'" + ($0.postgresText ?? "").replacing("'", with: "''") + "'" }.joined(separator: ", ")
            let plan = try connection.queryOnce(SQL(unsafeRaw: "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE lookup(\(values))"))
                .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
            #expect(plan.contains("threads_pkey") && !plan.contains("Seq Scan") && !plan.contains("Rows Removed by Filter"), "\(plan)")
            #expect(try connection.queryOnce(SQL(unsafeRaw: "EXECUTE lookup(\(values))")).count == 2)
        }
    }

    /// A claim's payloads for an app newer than the statistics (sql/0034, `JobQueue.payloads`).
    /// Statistics gathered before the app's rows say it has none, so every index that starts
    /// with the app looks like a one-row look-up: the planner took the token's index for a
    /// job's devices and filtered every device of the app for each job (a claim of 100 took
    /// 10 s in W5 of `make bench` on a cluster with older data), and read the app's blocks,
    /// messages, reactions and member actions whole, filtering them by the job. Each must be a
    /// look-up by its key: nothing removed by a filter.
    @Test("for an app newer than the statistics, a claim reads its blocks, messages and devices through their keys")
    func claimOfANewApp() throws {
        try withFreshDatabase { url in
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: try migrations()).migrate(connection)
            for app in ["old", "new"] {
                try connection.queryOnce("""
                    INSERT INTO events (app, source, id, type) SELECT \(app), 's', 'e' || g, 'message.created' FROM generate_series(1, 2000) g
                    """)
                try connection.queryOnce("""
                    INSERT INTO messages (app, id, event_source, event_id, sender, text) SELECT \(app), 'm' || g, 's', 'e' || g, 'a', 'hi' FROM generate_series(1, 2000) g
                    """)
                try connection.queryOnce("""
                    INSERT INTO reactions (app, id, message_id, reactor, reaction, conversation_id, receiver_type)
                    SELECT \(app), 'r' || g, 'm1', 'u' || g, 'x', 'c', 'group' FROM generate_series(1, 2000) g
                    """)
                try connection.queryOnce("""
                    INSERT INTO member_actions (app, event_source, event_id, group_id, uid, action, at)
                    SELECT \(app), 's', 'e' || g, 'g', 'u' || g, 'join', 1 FROM generate_series(1, 2000) g
                    """)
                try connection.queryOnce("""
                    INSERT INTO job_blocks (app, message_id, stop, recipients, reasons, privacy)
                    SELECT \(app), 'm' || g, 10, ARRAY(SELECT 'u' || i FROM generate_series(1, 10) i), array_fill(1::smallint, ARRAY[10]),
                           array_fill(false, ARRAY[10])
                      FROM generate_series(1, 300) g
                    """)
                // every user's unread threads (the badge) and digest windows (whether a job opened one)
                try connection.queryOnce("""
                    INSERT INTO subscriptions (app, uid, thread_id, subscribed, updated_at, visible, has_unread)
                    SELECT \(app), 'u' || g, 't' || t, true, 1, true, true FROM generate_series(1, 2000) g, generate_series(1, 3) t
                    """)
                try connection.queryOnce("""
                    INSERT INTO digest_windows (app, thread_id, uid, opened_at, ends_at, opened_by, max_age_ms)
                    SELECT \(app), 't1', 'u' || g, 1, 2, 'm' || (g % 300 + 1), 60000 FROM generate_series(1, 2000) g
                    """)
                try connection.queryOnce("""
                    INSERT INTO devices (app, uid, id, platform, token)
                    SELECT \(app), 'u' || g, d, 'apns', \(app) || d || g FROM generate_series(1, 2000) g, unnest(ARRAY['phone', 'tablet']) d
                    """)
                if app == "old" { try connection.queryOnce("ANALYZE") }
            }
            let block = try connection.queryOnce("SELECT id FROM job_blocks WHERE app = 'new' AND message_id = 'm150'")[0].decode(0, as: Int64.self)
            let payloads = JobQueue.payloads(app: "new", rowIDs: [], blocks: [block], firsts: [0], lasts: [1])
            let blockJobs = JobQueue.blockJobs(app: "new", blocks: [block], firsts: [1], lasts: [10])
            func explain(_ sql: SQL) throws -> String {
                try connection.queryOnce("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql)
                    .map { try $0.decode(0, as: String.self) }.joined(separator: "\n")
            }
            // Every look-up through its key: nothing a filter removes, no table of the app read
            // whole (a scan, or a hash built from it).
            func expectKeyed(_ plan: String) {
                #expect(plan.contains("devices_in_order") && !plan.contains("Rows Removed by") && !plan.contains("Hash"), "\(plan)")
                for table in ["job_blocks", "events", "messages", "reactions", "member_actions", "devices", "digest_windows", "subscriptions"] {
                    #expect(!plan.contains("Seq Scan on \(table) "), "\(table): \(plan)")
                }
            }
            // the claim's two statements (each range's first job; the range's others), each with a
            // custom plan, for the values given, and the generic plan that a claim runs
            // (`GenericPlans`), for any values
            for (name, statement) in [("payloads", payloads), ("block_jobs", blockJobs)] {
                try connection.queryOnce("SET plan_cache_mode = auto")
                expectKeyed(try explain(statement))
                try connection.queryOnce("SET plan_cache_mode = force_generic_plan")
                try connection.queryOnce(SQL(unsafeRaw: "PREPARE \(name) AS " + statement.text))
                let values = statement.parameters.map { $0.postgresText.map { "'" + $0.replacing("'", with: "''") + "'" } ?? "NULL" }
                expectKeyed(try explain(SQL(unsafeRaw: "EXECUTE \(name)(\(values.joined(separator: ", ")))")))
            }
        }
    }
}
