import Postgres

/// Generic plans for the rest of a transaction (`plan_cache_mode`).
///
/// PostgreSQL plans a prepared statement anew for each execution (a custom plan) until a generic
/// plan looks as cheap, which for Herald's statements — arrays of ids, an app the statistics may
/// not know — it rarely does. Herald's hot statements reach their rows through their keys
/// whatever the parameters (`OFFSET 0` look-ups, indexes no other look-up can take), so a
/// generic plan is as good and the planning is saved: a claim's payload query was planned on
/// every claim, 0.9 ms against 1.6 ms of execution (W5 of `make bench`, `pg_stat_statements`).
/// Not where the database asks for custom plans (`force_custom_plan`, the Citus layout's
/// setting): Citus routes a statement by the app it is given, which a generic plan does not know.
package enum GenericPlans {
    /// A select-list expression that sets it (local to the transaction).
    package static let setting: SQL = """
        set_config('plan_cache_mode', CASE current_setting('plan_cache_mode') WHEN 'force_custom_plan' THEN 'force_custom_plan'
                                                                               ELSE 'force_generic_plan' END, true)
        """

    /// Whether `connection` gains from it: inside a transaction (outside one it would last one
    /// statement), and where statements are prepared (behind a pooler in transaction mode each
    /// statement is planned at every run anyway, and a custom plan sees the values).
    package static func apply(on connection: PostgresConnection) -> Bool {
        connection.inTransaction && connection.preparesStatements
    }

    /// Queues the setting (`send`) when it applies: it travels with the transaction's next statement.
    package static func use(on connection: PostgresConnection) throws {
        guard apply(on: connection) else { return }
        try connection.send("SELECT \(setting)")
    }
}
