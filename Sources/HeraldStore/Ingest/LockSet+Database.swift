import HeraldDomain
import Postgres

extension LockSet {
    /// Takes the locks until the transaction ends. With `genericPlans`, the rest of the
    /// transaction runs its prepared statements with generic plans (`GenericPlans`): planning
    /// ingest's statements anew for every request cost more than running them.
    package func lock(app: String, on connection: PostgresConnection, genericPlans: Bool = false) throws {
        guard !isEmpty else { return }
        let sharedOnly = shared.subtracting(exclusive)
        let keys = Array(exclusive) + Array(sharedOnly)
        let isShared = Array(repeating: false, count: exclusive.count) + Array(repeating: true, count: sharedOnly.count)
        let generic: SQL = genericPlans && GenericPlans.apply(on: connection) ? "\(GenericPlans.setting)," : ""
        // Queued: the locks travel with the next statement, which runs once they are held.
        try connection.send("""
            SELECT \(generic)
                   CASE WHEN s THEN pg_advisory_xact_lock_shared(h)::text ELSE pg_advisory_xact_lock(h)::text END
              FROM (SELECT hashtextextended(\(app) || ':' || k, 0) AS h, bool_and(s) AS s
                      FROM unnest(\(keys)::text[], \(isShared)::boolean[]) AS x(k, s) GROUP BY 1 ORDER BY 1) l
            """)
    }
}

extension LockSet {
    /// Takes the locks that are free now, without waiting for the others, until the transaction
    /// ends; returns the keys it did not take (another transaction holds them). Never waits, so
    /// it cannot deadlock whatever is held; the caller works on what the taken locks cover and
    /// leaves the rest to a transaction of its own (`IngestStore.apply`).
    package func lockFree(app: String, on connection: PostgresConnection, genericPlans: Bool = false) throws -> Set<String> {
        guard !isEmpty else { return [] }
        let sharedOnly = shared.subtracting(exclusive)
        let keys = Array(exclusive) + Array(sharedOnly)
        let isShared = Array(repeating: false, count: exclusive.count) + Array(repeating: true, count: sharedOnly.count)
        // queued: the setting travels with the tries
        if genericPlans { try GenericPlans.use(on: connection) }
        // One try per lock, each lock with the keys that hash to it (exclusive if any of them
        // is); every lock is read, so every one is tried, and the keys of those not taken return.
        let rows = try connection.query("""
            SELECT unnest(l.keys) FROM (
                SELECT CASE WHEN s THEN pg_try_advisory_xact_lock_shared(h) ELSE pg_try_advisory_xact_lock(h) END AS taken, keys
                  FROM (SELECT hashtextextended(\(app) || ':' || k, 0) AS h, bool_and(s) AS s, array_agg(k) AS keys
                          FROM unnest(\(keys)::text[], \(isShared)::boolean[]) AS x(k, s) GROUP BY 1 ORDER BY 1) l
                ) l
             WHERE NOT l.taken
            """)
        var missed: Set<String> = []
        for row in rows { missed.insert(try row.decode(0, as: String.self)) }
        return missed
    }
}

extension LockSet {
    /// Runs `body` in a transaction holding the locks of what `resolve` finds (a message's thread
    /// and group), resolved again once they are held: what they guard may have changed while
    /// this waited (a parent found to be a reply moves its thread to the root, see
    /// `herald_rehome`). If it moved, the transaction runs again holding both sets from the
    /// start, all taken in one statement, in the one global order: never a lock taken after
    /// another outside that order.
    package static func holding<T>(app: String, on connection: PostgresConnection,
                           resolve: (PostgresConnection) throws -> (thread: String, locks: LockSet),
                           _ body: (String, PostgresConnection) throws -> T) throws -> T {
        var held = LockSet()
        for attempt in 0..<3 {
            do {
                return try connection.withTransaction { connection in
                    let (thread, locks) = try resolve(connection)
                    var all = held
                    all.formUnion(locks)
                    try all.lock(app: app, on: connection)
                    let again = try resolve(connection)
                    if again.thread != thread, !all.missing(from: again.locks).isEmpty {
                        all.formUnion(again.locks)
                        throw NeedsLocks(locks: all, groups: false)
                    }
                    return try body(again.thread, connection)
                }
            } catch let needed as NeedsLocks where attempt < 2 {
                held.formUnion(needed.locks)
            }
        }
        throw PostgresError(code: .server, sqlState: PostgresError.SQLState.serializationFailure, message: "the thread kept moving while its locks were taken")
    }
}
