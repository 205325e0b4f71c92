import HeraldDomain
import Postgres

/// Applies migrations in order, once each, recording them in `schema_migrations`.
///
/// Safe to run twice and from several instances at once, and through a pooler in transaction
/// mode: every step is one transaction that first takes the transaction advisory lock
/// `lockKey` and then looks again at what is applied, so concurrent runners apply each
/// migration once and in order. (A session lock held for the whole run would not survive a
/// transaction pooler: lock and unlock could run on different server connections.)
package struct Migrator: Sendable {
    /// The advisory lock key every Herald instance takes while migrating.
    package static let lockKey: Int64 = 0x4845_5241_4C44 // "HERALD"

    package let migrations: [Migration]
    /// `sql/functions/`: applied after the migrations on every run.
    package let functions: [Migration]
    /// `sql/citus/layout.sql`: applied after the functions on every run on Citus (idempotent).
    package let citusLayout: Migration?
    /// `HERALD_DB_MODE`; nil: Citus when the database has the citus extension.
    package let mode: DatabaseMode?

    package init(migrations: [Migration], functions: [Migration] = [], citusLayout: Migration? = nil, mode: DatabaseMode? = nil) {
        self.migrations = migrations
        self.functions = functions
        self.citusLayout = citusLayout
        self.mode = mode
    }

    /// The migrations, the functions and the Citus layout of a `sql/` folder.
    package init(directory: String, mode: DatabaseMode? = nil) throws {
        self.init(migrations: try Migration.load(directory: directory), functions: try Migration.loadFunctions(directory: directory),
                  citusLayout: try Migration.loadCitusLayout(directory: directory), mode: mode)
    }

    /// The newest version this binary knows.
    package var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Applies what is missing; returns the migrations applied by this call.
    @discardableResult
    package func migrate(_ connection: PostgresConnection) throws -> [Migration] {
        var applied = try locked(connection) { connection -> [Int: String] in
            try connection.queryOnce("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    checksum text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
            return try Self.appliedChecksums(connection)
        }
        var done: [Migration] = []
        for migration in migrations {
            if applied[migration.version] == nil {
                // Another runner may have applied it since: look again under the lock.
                let ran = try locked(connection) { connection -> Bool in
                    applied = try Self.appliedChecksums(connection)
                    guard applied[migration.version] == nil else { return false }
                    try connection.execute(unsafeSQL: migration.sql)
                    try connection.queryOnce("INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))")
                    return true
                }
                if ran {
                    done.append(migration)
                    continue
                }
            }
            guard applied[migration.version] == migration.checksum else {
                throw MigrationError(message: "migration \(migration.name) was changed after it was applied")
            }
        }
        // On Citus the layout runs in the functions' transaction: it gives them settings that
        // replacing them removes, and statements of running instances must never see them without.
        let citus = try DatabaseLayout.mode(connection, configured: mode) == .citus
        if citus && citusLayout == nil { throw MigrationError(message: "the database is Citus, and sql/citus/layout.sql is missing") }
        if !functions.isEmpty || citus {
            try locked(connection) { connection in
                for file in functions { try connection.execute(unsafeSQL: file.sql) }
                if citus, let citusLayout { try connection.execute(unsafeSQL: citusLayout.sql) }
            }
        }
        return done
    }

    /// One transaction holding the migration lock.
    private func locked<T>(_ connection: PostgresConnection, _ body: (PostgresConnection) throws -> T) throws -> T {
        try connection.withTransaction { connection in
            try connection.queryOnce("SELECT pg_advisory_xact_lock(\(Self.lockKey))")
            return try body(connection)
        }
    }

    private static func appliedChecksums(_ connection: PostgresConnection) throws -> [Int: String] {
        var applied: [Int: String] = [:]
        for row in try connection.queryOnce("SELECT version, checksum FROM schema_migrations") {
            applied[try row.decode("version", as: Int.self)] = try row.decode("checksum", as: String.self)
        }
        return applied
    }

    /// The newest applied version, 0 when nothing is applied.
    package func appliedVersion(_ connection: PostgresConnection) throws -> Int {
        do {
            let rows = try connection.query("SELECT coalesce(max(version), 0) FROM schema_migrations")
            return try rows.first?.decode(0, as: Int.self) ?? 0
        } catch let error as PostgresError where error.sqlState == PostgresError.SQLState.undefinedTable {
            return 0 // undefined_table: nothing was ever applied
        }
    }
}
