import HeraldDomain
import JSON
import Postgres

/// The job queue's transitions (SPEC §9), shared by the jobs API (pulled jobs) and built-in
/// delivery (SPEC §13.3), so that leases, retries, backoff and dead letters are one rule.
package enum JobQueue {
    package static let maxAttempts = 8

    /// A job's state (SPEC §9), as `job_rows.state` keeps it; `ready` with a future
    /// `available_at` is a retry waiting for its backoff.
    package enum State: String, Sendable {
        case ready, leased, acked, dead
    }

    /// A job acknowledged, with the devices its push service refused.
    package struct Ack {
        package let id: Int64
        package let attempt: Int
        package var invalidDevices: [String] = []

        package init(id: Int64, attempt: Int, invalidDevices: [String] = []) {
            self.id = id
            self.attempt = attempt
            self.invalidDevices = invalidDevices
        }
    }

    /// A job that failed: retried after `retryAfterMs` (else the backoff), or dead when not
    /// retryable or out of attempts.
    package struct Failure {
        package let id: Int64
        package let attempt: Int
        package let error: String
        package let retryable: Bool
        package let retryAfterMs: Int64?
        /// Direct delivery (SPEC §13.4): the devices that have their final outcome, which the
        /// retry leaves out.
        package var doneDevices: [String] = []

        package init(id: Int64, attempt: Int, error: String, retryable: Bool, retryAfterMs: Int64?, doneDevices: [String] = []) {
            self.id = id
            self.attempt = attempt
            self.error = error
            self.retryable = retryable
            self.retryAfterMs = retryAfterMs
            self.doneDevices = doneDevices
        }

        /// `doneDevices` as stored beside the others: a JSON array's text (arrays of arrays do
        /// not pass through `unnest`).
        package var doneJSON: String? {
            guard !doneDevices.isEmpty else { return nil }
            var writer = JSONWriter()
            writer.array(strings: doneDevices)
            return writer.text
        }
    }

    /// The FROM item `y` of an UPDATE of `job_rows j` (`WHERE \(leasedMatch(app:))`): the leased
    /// jobs of `app` named by the (id, attempt) pairs `ids`, `attempts`, with the other arrays of
    /// `extra` (`\(delays)::bigint[]` named `delay`, …) beside them.
    ///
    /// Each pair is one probe of the primary key `(app, id)` (inside `OFFSET 0`, so no other
    /// index can be chosen), and each row found one TID lookup, whatever the statistics say.
    /// Two plans this replaces took seconds: a join on `state = 'leased'`, planned for a table
    /// whose statistics said it held few leased jobs as a nested loop over the partial index
    /// `jobs_leased` that rescanned the pairs for every leased job (300 ms per 1,000 acks); and a
    /// probe on `app = $1 AND id = …`, planned for an app newer than the statistics as a scan of
    /// the app's every job through the index led by `app` (80 ms per job acked, W5 of make bench).
    package static func leased(app: String, ids: [Int64], attempts: [Int], extra: [(array: SQL, name: SQL)] = []) -> SQL {
        let names = SQL.joined(extra.map { ", x.\($0.name)" }, separator: "")
        let arrays = SQL.joined(extra.map { ", \($0.array)" }, separator: "")
        let columns = SQL.joined(extra.map { ", \($0.name)" }, separator: "")
        return """
        (SELECT t.ctid AS row, x.attempt\(names)
           FROM unnest(\(ids)::bigint[], \(attempts)::int[]\(arrays))
                AS x(id, attempt\(columns))
          CROSS JOIN LATERAL (SELECT ctid, app, attempt, state FROM job_rows WHERE app = \(app) AND id = x.id OFFSET 0) t
          WHERE t.app = \(app) AND t.attempt = x.attempt AND t.state = 'leased') y
        """
    }

    /// The WHERE of an UPDATE over `leased(…)`: the row found, still leased with the same
    /// attempt. The second test is what PostgreSQL checks again on the newest version of a row
    /// that another transaction changed meanwhile (a lease that expired and was claimed again:
    /// the stale ack must not touch it); written as a CASE so that it cannot make `jobs_leased`
    /// usable for `j` and bring back the first slow plan. The app stands outside it: Citus routes
    /// the statement to the app's worker by it.
    package static func leasedMatch(app: String) -> SQL {
        "j.app = \(app) AND j.ctid = y.row AND CASE WHEN j.state = 'leased' THEN j.attempt END = y.attempt"
    }

    /// Exponential backoff from 1 s, capped at 5 minutes, with "equal jitter".
    package static func backoffMs(attempt: Int) -> Int64 {
        var generator = SystemRandomNumberGenerator()
        let base = min(Int64(300_000), Int64(1000) << min(max(attempt, 1) - 1, 20))
        return base / 2 + Int64.random(in: 0...(base / 2), using: &generator)
    }

    /// The columns of a job row (`job_rows`, and the `jobs` view's rows) that `JobPayload` reads.
    package static let rowColumns: SQL = """
        id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy, badge, state, attempt,
        created_at, available_at, lease_until, last_error, updated_at, kind, exclude_device, clear_ids, template_reason,
        subject_id, sync_at, sync_by, digest_count, digest_senders, delivered_devices
        """

    /// Seconds until a job of one of `apps` becomes claimable without an insert: a retry whose
    /// backoff ends, or a lease that expires (three index probes per app); nil when none will.
    /// Long-poll claims (JobWaiter) and built-in delivery (AppDeliverer) sleep until then.
    package static func nextDue(apps: [String], on connection: PostgresConnection) throws -> Double? {
        // One statement per app: each names its app (on Citus, the worker that holds it).
        var soonest: Int64?
        for app in Set(apps) {
            let rows = try connection.query("""
                SELECT least((SELECT j.available_at FROM job_rows j WHERE j.app = \(app) AND j.state = 'ready' ORDER BY j.available_at LIMIT 1),
                             (SELECT j.lease_until FROM job_rows j WHERE j.app = \(app) AND j.state = 'leased' ORDER BY j.lease_until LIMIT 1),
                             (SELECT l.until FROM job_leases l WHERE l.app = \(app) ORDER BY l.until LIMIT 1)) - herald_now_ms()
                """)
            if let due = try rows.first?.decode(0, as: Int64?.self) { soonest = min(soonest ?? due, due) }
        }
        guard let milliseconds = soonest else { return nil }
        return Double(max(milliseconds, 0)) / 1000
    }

    /// Returns expired leases to the queue, then leases up to `max` ready jobs: row jobs first
    /// (retries, silent jobs), then ranges of the oldest blocks (`herald_claim_jobs`). Two round
    /// trips: the claim, then the payloads of what it leased; in a transaction, with generic
    /// plans (`GenericPlans`). A block's jobs share everything but their recipient's part, so the
    /// payloads are two statements in one round trip: each range's first job in full (with the
    /// row jobs), and the range's other jobs in short (`blockJobs`), each made from its range's
    /// first (`JobPayload(block:row:)`) — PostgreSQL reads a block's message once, not once a job,
    /// and returns seven columns a job instead of forty.
    package static func claim(app: String, max: Int, leaseSeconds: Int, on connection: PostgresConnection) throws -> [JobPayload] {
        try GenericPlans.use(on: connection)
        var rowIDs: [Int64] = [], blocks: [Int64] = [], firsts: [Int] = [], lasts: [Int] = []
        for row in try connection.query("SELECT row_id, block, first, last FROM herald_claim_jobs(\(app), \(max), \(leaseSeconds))") {
            if let block = try row.decode("block", as: Int64?.self) {
                blocks.append(block)
                firsts.append(try row.decode("first"))
                lasts.append(try row.decode("last"))
            } else {
                rowIDs.append(try row.decode("row_id"))
            }
        }
        guard !rowIDs.isEmpty || !blocks.isEmpty else { return [] }
        let seconds = firsts.map { $0 + 1 }
        var statements = [payloads(app: app, rowIDs: rowIDs, blocks: blocks, firsts: firsts, lasts: seconds)]
        if zip(seconds, lasts).contains(where: { $0 < $1 }) {
            statements.append(blockJobs(app: app, blocks: blocks, firsts: seconds, lasts: lasts))
        }
        let results = try connection.pipeline(statements)
        var jobs = try results[0].map { try JobPayload(row: $0) }
        guard results.count > 1 else { return jobs }
        // each range's first job, by block (a row job's id names no claimed block's first position)
        var firstJobs: [Int64: JobPayload] = [:]
        let firstOf = Dictionary(zip(blocks, firsts), uniquingKeysWith: min)
        for job in jobs {
            let (block, position) = JobBlocks.place(job.id)
            if firstOf[block] == position { firstJobs[block] = job }
        }
        for row in results[1] {
            let id = try row.decode("id", as: Int64.self)
            guard let first = firstJobs[JobBlocks.place(id).block] else {
                // the first statement read every range's first job in the same transaction
                throw PostgresError(code: .decoding, message: "job \(id) of a claimed range came without its range's first job")
            }
            jobs.append(try JobPayload(block: first, row: row))
        }
        return jobs.sorted { $0.id < $1.id }
    }

    /// The FROM items of ranges of blocks: `r` (block, first, last) — the positions from
    /// `firsts[i]` up to `lasts[i]` of the block `blocks[i]` —, its block `b`, then the items of
    /// `joining` (which may read `b`), then `p`, each job of the range (recipient, reason code,
    /// privacy, n from 1); `rangeJobID` is the job's id.
    private static func ranges(app: String, blocks: [Int64], firsts: [Int], lasts: [Int], joining: SQL = "") -> SQL {
        """
        unnest(\(blocks)::bigint[], \(firsts)::int[], \(lasts)::int[]) AS r(block, first, last)
          -- each block through its key (OFFSET 0): statistics that say the app has one
          -- block made it a scan of the app's blocks, each with its trace looked up
         CROSS JOIN LATERAL (SELECT * FROM job_blocks b WHERE b.app = \(app) AND b.id = r.block OFFSET 0) b
         \(joining)
          -- slices of the block's arrays, each read once (not the whole block unnested, nor an
          -- array subscript per job, which would detoast it every time)
         CROSS JOIN LATERAL unnest(b.recipients[r.first + 1:r.last], b.reasons[r.first + 1:r.last], b.privacy[r.first + 1:r.last])
               WITH ORDINALITY AS p(recipient, reason, privacy, n)
        """
    }

    /// The id of the job `p` of a range (`ranges`).
    private static let rangeJobID: SQL = "b.id * \(unsafeRaw: String(JobBlocks.size)) + r.first + p.n - 1"

    /// The payloads of what a claim leased: the row jobs `rowIDs`, and of each block `blocks[i]`
    /// the positions from `firsts[i]` up to `lasts[i]`, in id order.
    package static func payloads(app: String, rowIDs: [Int64], blocks: [Int64], firsts: [Int], lasts: [Int]) -> SQL {
        """
        WITH claimed AS (
            SELECT \(rowColumns), \(JobPayload.traceOf("job_rows", app: app)) FROM job_rows WHERE app = \(app) AND id = ANY (\(rowIDs)::bigint[])
            UNION ALL
            SELECT \(rangeJobID), b.app, b.message_id, p.recipient, b.event_source, b.event_id, b.event_type,
                   herald_reason_name(p.reason), p.privacy, 0, 'leased', 1, b.created_at, b.created_at, NULL::bigint,
                   NULL::text, b.created_at, NULL::text, NULL::text, NULL::text[], NULL::text, NULL::text, NULL::bigint, NULL::text,
                   NULL::integer, NULL::text[], NULL::text[], t.traceparent
              FROM \(ranges(app: app, blocks: blocks, firsts: firsts, lasts: lasts, joining: """
                   -- the event's trace, looked up once per block, not per job
                   LEFT JOIN LATERAL (SELECT \(JobPayload.traceOf("b", app: app))) t ON true
                   """))
        )
        SELECT \(JobPayload.columns(app: app))
          FROM \(JobPayload.from("claimed", app: app))
         ORDER BY j.id
        """
    }

    /// Of each block `blocks[i]`, the jobs at the positions from `firsts[i]` up to `lasts[i]`,
    /// in id order: what a block's job has of its own (`JobPayload(block:row:)` reads it) — its
    /// id, recipient, reason and privacy, and what is read for its recipient when it is claimed
    /// (`JobPayload.recipientColumns`). The block's message is read once per block: `j` and
    /// `m` are what `recipientColumns` reads.
    package static func blockJobs(app: String, blocks: [Int64], firsts: [Int], lasts: [Int]) -> SQL {
        """
        SELECT j.id, j.recipient, j.reason, j.privacy, \(JobPayload.recipientColumns(app: app))
          FROM \(ranges(app: app, blocks: blocks, firsts: firsts, lasts: lasts, joining: """
               LEFT JOIN LATERAL (SELECT m.parent_id FROM messages m WHERE m.app = \(app) AND m.id = b.message_id OFFSET 0) m ON true
               """))
         CROSS JOIN LATERAL (SELECT \(rangeJobID) AS id, b.message_id, p.recipient, herald_reason_name(p.reason) AS reason, p.privacy,
                                    NULL::text AS kind, 0 AS badge, NULL::text AS exclude_device, NULL::text[] AS delivered_devices) j
         ORDER BY j.id
        """
    }

    /// Splits `jobs` into those leased in a block at attempt 1, with the block's marks locked,
    /// and the others (row jobs, and ids no block claimed: they go to `job_rows`, where they are
    /// stale unless a row has them).
    private static func split<T>(app: String, _ jobs: [T], id: (T) -> Int64, attempt: (T) -> Int,
                                 on connection: PostgresConnection) throws -> (marks: [Int64: JobBlocks.Marks], rows: [T]) {
        try GenericPlans.use(on: connection)
        let candidates = jobs.filter { attempt($0) == 1 }.map { JobBlocks.place(id($0)).block }
        let marks = try JobBlocks.lockMarks(app: app, blocks: candidates, on: connection)
        return (marks, jobs.filter { attempt($0) != 1 || marks[JobBlocks.place(id($0)).block] == nil })
    }

    /// Acknowledges the jobs whose attempt is current, and removes the devices their push
    /// service refused (SPEC §13.1) — only those of jobs this call acknowledged. Returns the ids
    /// acknowledged. Runs in the caller's transaction.
    package static func ack(app: String, _ acks: [Ack], on connection: PostgresConnection) throws -> Set<Int64> {
        guard !acks.isEmpty else { return [] }
        let parts = try split(app: app, acks, id: \.id, attempt: \.attempt, on: connection)
        var marks = parts.marks
        let rowAcks = parts.rows
        var acked: Set<Int64> = []
        // A block's jobs: one update of its marks, which also ends the leases left with nothing to do.
        var changed: [Int64: JobBlocks.Bits] = [:]
        for ack in acks where ack.attempt == 1 {
            let (block, position) = JobBlocks.place(ack.id)
            guard var state = marks[block], state.isLeased(position) else { continue }
            state.acked[position] = true
            marks[block] = state
            changed[block, default: JobBlocks.Bits()][position] = true
            acked.insert(ack.id)
        }
        if !changed.isEmpty {
            let order = changed.keys.sorted()
            // queued: nobody reads its rows, so it travels with the next statement (the COMMIT)
            try connection.send("""
                WITH u AS (
                    UPDATE job_block_marks k SET acked = k.acked | x.mask::bit(1024)
                      FROM unnest(\(order)::bigint[], \(order.map { changed[$0]!.text })::text[]) AS x(block, mask)
                     WHERE k.app = \(app) AND k.block = x.block
                    RETURNING k.block, k.acked | k.moved AS done
                )
                DELETE FROM job_leases l USING u
                 WHERE l.app = \(app) AND l.block = u.block AND bit_count(substring(u.done FROM l.first + 1 FOR l.last - l.first)) = l.last - l.first
                """)
        }
        var pairs: [(uid: String, id: String)] = []
        let refused = acks.filter { !$0.invalidDevices.isEmpty && acked.contains($0.id) }
        if !refused.isEmpty {
            let rows = try connection.query("""
                SELECT x.id, b.recipients[(x.id % 1024)::int + 1] AS recipient
                  FROM unnest(\(refused.map(\.id))::bigint[]) AS x(id) JOIN job_blocks b ON b.app = \(app) AND b.id = x.id / 1024
                """)
            var recipients: [Int64: String] = [:]
            for row in rows { recipients[try row.decode("id", as: Int64.self)] = try row.decode("recipient", as: String.self) }
            for ack in refused { for device in ack.invalidDevices { if let uid = recipients[ack.id] { pairs.append((uid, device)) } } }
        }
        // Row jobs.
        if !rowAcks.isEmpty {
            let rows = try connection.query("""
                UPDATE job_rows j SET state = 'acked', lease_until = NULL, updated_at = herald_now_ms()
                  FROM \(leased(app: app, ids: rowAcks.map(\.id), attempts: rowAcks.map(\.attempt)))
                 WHERE \(leasedMatch(app: app))
                RETURNING j.id, j.recipient
                """)
            var invalid: [Int64: [String]] = [:]
            for ack in rowAcks where !ack.invalidDevices.isEmpty { invalid[ack.id, default: []].append(contentsOf: ack.invalidDevices) }
            for row in rows {
                let id = try row.decode("id", as: Int64.self)
                acked.insert(id)
                for device in invalid[id] ?? [] { pairs.append((try row.decode("recipient"), device)) }
            }
        }
        try DeviceStore().remove(app: app, pairs: pairs, on: connection)
        return acked
    }

    /// Fails the jobs whose attempt is current: each is retried later or dead. Returns the
    /// state each handled job is in now (`ready` or `dead`), by id. Runs in the caller's
    /// transaction.
    package static func fail(app: String, _ failures: [Failure], on connection: PostgresConnection) throws -> [Int64: State] {
        guard !failures.isEmpty else { return [:] }
        let parts = try split(app: app, failures, id: \.id, attempt: \.attempt, on: connection)
        var marks = parts.marks
        let rowFailures = parts.rows
        var states: [Int64: State] = [:]
        var moves: [JobBlocks.Move] = []
        for failure in failures where failure.attempt == 1 {
            let (block, position) = JobBlocks.place(failure.id)
            guard var state = marks[block], state.isLeased(position) else { continue }
            state.moved[position] = true
            marks[block] = state
            let dead = !failure.retryable || failure.attempt >= maxAttempts
            moves.append(JobBlocks.Move(id: failure.id, state: dead ? .dead : .ready, attempt: 1,
                                        delay: failure.retryAfterMs ?? backoffMs(attempt: 1), error: Self.clean(failure.error),
                                        done: failure.doneJSON))
            states[failure.id] = dead ? .dead : .ready
        }
        try JobBlocks.moveOut(app: app, moves, on: connection)
        if !rowFailures.isEmpty {
            let rows = try connection.query("""
                UPDATE job_rows j SET state = CASE WHEN y.dead THEN 'dead' ELSE 'ready' END,
                                  available_at = herald_now_ms() + y.delay, lease_until = NULL,
                                  last_error = y.error, updated_at = herald_now_ms(),
                                  delivered_devices = CASE WHEN y.done IS NULL THEN j.delivered_devices
                                                           ELSE coalesce(j.delivered_devices, '{}')
                                                                || ARRAY(SELECT json_array_elements_text(y.done::json)) END
                  FROM \(leased(app: app, ids: rowFailures.map(\.id), attempts: rowFailures.map(\.attempt), extra: [
                      ("\(rowFailures.map { $0.retryAfterMs ?? backoffMs(attempt: $0.attempt) })::bigint[]", "delay"),
                      ("\(rowFailures.map { !$0.retryable || $0.attempt >= maxAttempts })::boolean[]", "dead"),
                      ("\(rowFailures.map { Self.clean($0.error) })::text[]", "error"),
                      ("\(rowFailures.map(\.doneJSON))::text[]", "done")]))
                 WHERE \(leasedMatch(app: app))
                RETURNING j.id, j.state
                """)
            for row in rows { states[try row.decode(0, as: Int64.self)] = State(rawValue: try row.decode(1, as: String.self)) }
        }
        if states.values.contains(.ready) { try announce(app: app, on: connection) }
        return states
    }

    /// A worker's error as stored: at most 2,000 characters, no NUL.
    private static func clean(_ error: String) -> String { String(error.prefix(2000)).replacing("\u{0}", with: "") }

    /// Tells the claims waiting on every instance that jobs of `app` are (or will be) ready
    /// without an insert: a release, a retry, a requeue (NOTIFY, sent at commit).
    package static func announce(app: String, on connection: PostgresConnection) throws {
        try connection.query("SELECT herald_notify('herald_jobs', \(app))")
    }

    /// Gives leased jobs back untouched, as if never claimed (a delivery that stopped before
    /// sending them): ready in their old place (a claim leaves `available_at` as it was), the
    /// claim's attempt undone. A block's job moves out to `job_rows` for that. Runs in the
    /// caller's transaction.
    package static func release(app: String, _ jobs: [(id: Int64, attempt: Int)], on connection: PostgresConnection) throws {
        guard !jobs.isEmpty else { return }
        let (marks, rowJobs) = try split(app: app, jobs, id: \.id, attempt: \.attempt, on: connection)
        let moves = jobs.filter { job in
            let (block, position) = JobBlocks.place(job.id)
            return job.attempt == 1 && marks[block]?.isLeased(position) == true
        }.map { JobBlocks.Move(id: $0.id, state: .ready, attempt: 0, delay: nil, error: nil, done: nil) }
        try JobBlocks.moveOut(app: app, moves, on: connection)
        var released = moves.count
        if !rowJobs.isEmpty {
            released += try connection.query("""
                UPDATE job_rows j SET state = 'ready', attempt = j.attempt - 1, lease_until = NULL, updated_at = herald_now_ms()
                  FROM \(leased(app: app, ids: rowJobs.map(\.id), attempts: rowJobs.map(\.attempt)))
                 WHERE \(leasedMatch(app: app))
                """).affectedRows
        }
        if released > 0 { try announce(app: app, on: connection) }
    }

    /// The queue's counts, of one app or of all (`app` nil): ready (including expired
    /// leases), leased, retrying (waiting for their backoff), dead, and the oldest ready job's
    /// age in ms. From the row jobs in state ready, leased or dead, the blocks with jobs left to
    /// claim (`stop - claimed` each), and the lease ranges (their positions neither acked nor
    /// moved). Shared by the stats route and `/metrics`.
    package static func counts(app: String?) -> SQL {
        let appIs: SQL = app.map { "app = \($0) AND" } ?? ""
        let leaseApp: SQL = app.map { "WHERE l.app = \($0)" } ?? ""
        return """
            SELECT r.ready + b.ready + l.expired AS ready, r.leased + l.leased AS leased, r.retrying, r.dead,
                   coalesce(herald_now_ms() - least(r.oldest, b.oldest), 0) AS oldest_ready_age_ms
              FROM (SELECT count(*) FILTER (WHERE (state = 'ready' AND available_at <= herald_now_ms())
                                                OR (state = 'leased' AND lease_until <= herald_now_ms())) AS ready,
                           count(*) FILTER (WHERE state = 'leased' AND lease_until > herald_now_ms()) AS leased,
                           count(*) FILTER (WHERE state = 'ready' AND available_at > herald_now_ms()) AS retrying,
                           count(*) FILTER (WHERE state = 'dead') AS dead,
                           min(available_at) FILTER (WHERE state = 'ready' AND available_at <= herald_now_ms()) AS oldest
                      FROM job_rows WHERE \(appIs) state IN ('ready', 'leased', 'dead')) r,
                   (SELECT coalesce(sum(stop - claimed), 0)::bigint AS ready, min(created_at) AS oldest
                      FROM job_blocks WHERE \(appIs) claimed < stop) b,
                   (SELECT coalesce(sum(n) FILTER (WHERE until > herald_now_ms()), 0)::bigint AS leased,
                           coalesce(sum(n) FILTER (WHERE until <= herald_now_ms()), 0)::bigint AS expired
                      FROM (SELECT l.until, (l.last - l.first) - bit_count(substring(k.acked | k.moved FROM l.first + 1 FOR l.last - l.first)) AS n
                              FROM job_leases l JOIN job_block_marks k ON k.app = l.app AND k.block = l.block \(leaseApp)) s) l
            """
    }

    /// The queue's counts of one app, as `counts(app:)` selects them.
    package static func counts(app: String, on connection: PostgresConnection) throws -> PostgresRow {
        try connection.query(counts(app: app))[0]
    }

    /// Dead jobs of `app` after the id `after` (nil: from the first), in id order, at most `limit`.
    package static func dead(app: String, after: Int64?, limit: Int, on connection: PostgresConnection) throws -> [JobPayload] {
        try connection.query("""
            SELECT \(JobPayload.columns(app: app))
              FROM \(JobPayload.from("(SELECT job_rows.*, \(JobPayload.traceOf("job_rows", app: app)) FROM job_rows WHERE job_rows.app = \(app))", app: app))
             WHERE j.app = \(app) AND j.state = 'dead' AND (\(after)::bigint IS NULL OR j.id > \(after))
             ORDER BY j.id LIMIT \(limit)
            """).map { try JobPayload(row: $0) }
    }

    /// Dead jobs of `app` among `ids` made ready again, each under a new id (a worker still
    /// holding the old one cannot ack or fail the new life); returns how many.
    package static func requeue(app: String, ids: [Int64], on connection: PostgresConnection) throws -> Int {
        // The new ids are drawn first (Citus refuses a volatile call in an UPDATE's SET).
        let rows = try connection.query("""
            WITH fresh AS MATERIALIZED (SELECT x.id AS old, nextval('jobs_id_seq') * 1024 AS new FROM unnest(\(ids)::bigint[]) AS x(id))
            UPDATE job_rows j SET state = 'ready', attempt = 0, available_at = herald_now_ms(), last_error = NULL,
                              updated_at = herald_now_ms(), id = f.new
              FROM fresh f
             WHERE j.app = \(app) AND j.id = f.old AND j.state = 'dead'
            """)
        if rows.affectedRows > 0 { try announce(app: app, on: connection) }
        return rows.affectedRows
    }
}
