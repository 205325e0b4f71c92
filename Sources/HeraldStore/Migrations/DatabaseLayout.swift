import HeraldDomain
import Postgres

/// Whether the database is one PostgreSQL or a Citus coordinator (docs/scaling.md).
package enum DatabaseLayout {
    /// The mode to lay the schema out for: `configured` (`HERALD_DB_MODE`) when set, else Citus
    /// when the database has the citus extension. Throws when Citus is configured and the
    /// extension is missing.
    package static func mode(_ connection: PostgresConnection, configured: DatabaseMode?) throws -> DatabaseMode {
        let hasCitus = try connection.queryOnce("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus")
            .first?.decode("citus", as: Bool.self) ?? false
        switch configured {
        case .postgres?: return .postgres
        case .citus?:
            guard hasCitus else {
                throw MigrationError(message: "HERALD_DB_MODE is citus, and the database has no citus extension (CREATE EXTENSION citus on the coordinator and every worker)")
            }
            return .citus
        case nil: return hasCitus ? .citus : .postgres
        }
    }
}
