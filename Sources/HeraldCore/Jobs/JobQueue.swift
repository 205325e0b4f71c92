import Postgres

/// The job queue's transitions (SPEC §9), shared by the jobs API (pulled jobs) and built-in
/// delivery (SPEC §13.3), so that leases, retries, backoff and dead letters are one rule.
enum JobQueue {
    static let maxAttempts = 8

    /// A job acknowledged, with the devices its push service refused.
    struct Ack {
        let id: Int64
        let attempt: Int
        var invalidDevices: [String] = []
    }

    /// A job that failed: retried after `retryAfterMs` (else the backoff), or dead when not
    /// retryable or out of attempts.
    struct Failure {
        let id: Int64
        let attempt: Int
        let error: String
        let retryable: Bool
        let retryAfterMs: Int64?
    }

    /// The FROM item `y` of an UPDATE of `jobs j` (`WHERE \(leasedMatch)`): the leased jobs of
    /// app `$1` named by the (id, attempt) pairs `$2`, `$3`, with the other arrays of `extra`
    /// (`$4::bigint[] AS delay`, …) beside them.
    ///
    /// Each pair is one probe of the primary key (`id` alone inside `OFFSET 0`, so no other
    /// index can be chosen), and each row found one TID lookup, whatever the statistics say.
    /// Two plans this replaces took seconds: a join on `state = 'leased'`, planned for a table
    /// whose statistics said it held few leased jobs as a nested loop over the partial index
    /// `jobs_leased` that rescanned the pairs for every leased job (300 ms per 1,000 acks); and a
    /// probe on `app = $1 AND id = …`, planned for an app newer than the statistics as a scan of
    /// the app's every job through the index led by `app` (80 ms per job acked, W5 of make bench).
    static func leased(extra: [(parameter: String, name: String)] = []) -> String {
        """
        (SELECT t.ctid AS row, x.attempt\(extra.map { ", x." + $0.name }.joined())
           FROM unnest($2::bigint[], $3::int[]\(extra.map { ", " + $0.parameter }.joined()))
                AS x(id, attempt\(extra.map { ", " + $0.name }.joined()))
          CROSS JOIN LATERAL (SELECT ctid, app, attempt, state FROM jobs WHERE id = x.id OFFSET 0) t
          WHERE t.app = $1 AND t.attempt = x.attempt AND t.state = 'leased') y
        """
    }

    /// The WHERE of an UPDATE over `leased(…)`: the row found, still leased with the same
    /// attempt. The second test is what PostgreSQL checks again on the newest version of a row
    /// that another transaction changed meanwhile (a lease that expired and was claimed again:
    /// the stale ack must not touch it); written as a CASE so that it cannot make `jobs_leased`
    /// usable for `j` and bring back the first slow plan.
    static let leasedMatch = "j.ctid = y.row AND CASE WHEN j.app = $1 AND j.state = 'leased' THEN j.attempt END = y.attempt"

    /// Exponential backoff from 1 s, capped at 5 minutes, with "equal jitter".
    static func backoffMs(attempt: Int) -> Int64 {
        var generator = SystemRandomNumberGenerator()
        let base = min(Int64(300_000), Int64(1000) << min(max(attempt, 1) - 1, 20))
        return base / 2 + Int64.random(in: 0...(base / 2), using: &generator)
    }

    /// Returns expired leases to the queue, then leases up to `max` ready jobs, in id order.
    static func claim(app: String, max: Int, leaseSeconds: Int, on connection: PostgresConnection) throws -> [JobPayload] {
        try connection.query("""
            UPDATE jobs SET state = 'ready', available_at = lease_until, lease_until = NULL, updated_at = herald_now_ms()
             WHERE app = $1 AND state = 'leased' AND lease_until <= herald_now_ms()
            """, [app])
        // The picked rows are updated through their ctid (a Tid Scan in every plan). A join
        // on (app, id) was planned, depending on statistics, as a scan of every job of the
        // app: as a generic plan's hash join, or, for an app newer than the last ANALYZE,
        // through another index led by app. Either took seconds per claim once the table
        // held a few hundred thousand jobs (W5 of make bench). The rows are locked by the
        // subquery, so their ctids cannot change before the update.
        let rows = try connection.query("""
            WITH claimed AS (
                UPDATE jobs j SET state = 'leased', attempt = j.attempt + 1,
                                  lease_until = herald_now_ms() + $3::bigint * 1000, updated_at = herald_now_ms()
                 WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM jobs
                                            WHERE app = $1 AND state = 'ready' AND available_at <= herald_now_ms()
                                            ORDER BY available_at, id LIMIT $2
                                            FOR UPDATE SKIP LOCKED))
                RETURNING j.*)
            SELECT \(JobPayload.columns)
              FROM \(JobPayload.from("claimed"))
             ORDER BY j.id
            """, [app, max, leaseSeconds])
        return try rows.map { try JobPayload(row: $0) }
    }

    /// Acknowledges the jobs whose attempt is current, and removes the devices their push
    /// service refused (SPEC §13.1) — only those of jobs this call acknowledged. Returns the ids
    /// acknowledged. Runs in the caller's transaction.
    static func ack(app: String, _ acks: [Ack], on connection: PostgresConnection) throws -> Set<Int64> {
        guard !acks.isEmpty else { return [] }
        let rows = try connection.query("""
            UPDATE jobs j SET state = 'acked', lease_until = NULL, updated_at = herald_now_ms()
              FROM \(leased())
             WHERE \(leasedMatch)
            RETURNING j.id, j.recipient
            """, [app, acks.map(\.id), acks.map(\.attempt)])
        var invalid: [Int64: [String]] = [:]
        for ack in acks where !ack.invalidDevices.isEmpty { invalid[ack.id, default: []].append(contentsOf: ack.invalidDevices) }
        var pairs: [(uid: String, id: String)] = []
        var acked: Set<Int64> = []
        for row in rows {
            let id = try row.decode("id", as: Int64.self)
            acked.insert(id)
            for device in invalid[id] ?? [] { pairs.append((try row.decode("recipient"), device)) }
        }
        try DeviceStore().remove(app: app, pairs: pairs, on: connection)
        return acked
    }

    /// Fails the jobs whose attempt is current: each is retried later or dead. Returns the
    /// state each handled job is in now (`ready` or `dead`), by id.
    static func fail(app: String, _ failures: [Failure], on connection: PostgresConnection) throws -> [Int64: String] {
        guard !failures.isEmpty else { return [:] }
        let rows = try connection.query("""
            UPDATE jobs j SET state = CASE WHEN y.dead THEN 'dead' ELSE 'ready' END,
                              available_at = herald_now_ms() + y.delay, lease_until = NULL,
                              last_error = y.error, updated_at = herald_now_ms()
              FROM \(leased(extra: [("$4::bigint[]", "delay"), ("$5::boolean[]", "dead"), ("$6::text[]", "error")]))
             WHERE \(leasedMatch)
            RETURNING j.id, j.state
            """, [app, failures.map(\.id), failures.map(\.attempt),
                  failures.map { $0.retryAfterMs ?? backoffMs(attempt: $0.attempt) },
                  failures.map { !$0.retryable || $0.attempt >= maxAttempts },
                  failures.map { String($0.error.prefix(2000)).replacing("\u{0}", with: "") }])
        var states: [Int64: String] = [:]
        for row in rows { states[try row.decode(0, as: Int64.self)] = try row.decode(1, as: String.self) }
        if states.values.contains("ready") { try announce(app: app, on: connection) }
        return states
    }

    /// Tells the claims waiting on every instance that jobs of `app` are (or will be) ready
    /// without an insert: a release, a retry, a requeue (NOTIFY, sent at commit).
    static func announce(app: String, on connection: PostgresConnection) throws {
        try connection.query("SELECT pg_notify('herald_jobs', $1)", [app])
    }

    /// Gives leased jobs back untouched, as if never claimed (a delivery that stopped before
    /// sending them): ready in their old place (a claim leaves `available_at` as it was), the
    /// claim's attempt undone.
    static func release(app: String, _ jobs: [(id: Int64, attempt: Int)], on connection: PostgresConnection) throws {
        guard !jobs.isEmpty else { return }
        let rows = try connection.query("""
            UPDATE jobs j SET state = 'ready', attempt = j.attempt - 1, lease_until = NULL, updated_at = herald_now_ms()
              FROM \(leased())
             WHERE \(leasedMatch)
            """, [app, jobs.map(\.id), jobs.map(\.attempt)])
        if rows.affectedRows > 0 { try announce(app: app, on: connection) }
    }
}
