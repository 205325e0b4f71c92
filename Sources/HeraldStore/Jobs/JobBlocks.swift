import HeraldDomain
import Postgres

/// Jobs in blocks (`sql/0024_job_blocks.sql`, `docs/jobs.md`): a job id names its block and its
/// position, a reason is stored as a code, and a block's marks (acked, moved) are bit strings.
package enum JobBlocks {
    /// The most jobs a block holds; a job id is its block × `size` + its position.
    package static let size: Int64 = 1024

    /// The block and position a job id names (a row job of its own names a number that is no block).
    package static func place(_ id: Int64) -> (block: Int64, position: Int) { (id / size, Int(id % size)) }

    /// The bits of one block's marks (`bit(1024)` as text, position 0 first).
    package struct Bits {
        package var bits: [UInt8]

        package init() { bits = Array(repeating: UInt8(ascii: "0"), count: Int(JobBlocks.size)) }

        package init(text: String) {
            self.init()
            for (index, byte) in text.utf8.prefix(Int(JobBlocks.size)).enumerated() { bits[index] = byte }
        }

        package subscript(position: Int) -> Bool {
            get { bits[position] == UInt8(ascii: "1") }
            set { bits[position] = newValue ? UInt8(ascii: "1") : UInt8(ascii: "0") }
        }

        package var text: String { String(decoding: bits, as: UTF8.self) }
    }

    /// A claimed block's state, locked for the caller's transaction.
    package struct Marks {
        package var acked: Bits
        package var moved: Bits
        package let claimed: Int

        /// Whether the job at `position` is leased with attempt 1: claimed, neither acked nor moved.
        package func isLeased(_ position: Int) -> Bool { position < claimed && !acked[position] && !moved[position] }
    }

    /// Locks the marks of those of `blocks` that belong to `app` and were claimed, in block order
    /// (the order every writer of marks takes), and returns them by block.
    package static func lockMarks(app: String, blocks: some Sequence<Int64>, on connection: PostgresConnection) throws -> [Int64: Marks] {
        let wanted = Array(Set(blocks)).sorted()
        guard !wanted.isEmpty else { return [:] }
        var marks: [Int64: Marks] = [:]
        for row in try connection.query("""
            SELECT k.block, k.acked::text AS acked, k.moved::text AS moved, b.claimed
              FROM job_block_marks k JOIN job_blocks b ON b.app = \(app) AND b.id = k.block
             WHERE k.app = \(app) AND k.block = ANY (\(wanted)::bigint[])
             ORDER BY k.block FOR UPDATE OF k
            """) {
            marks[try row.decode("block", as: Int64.self)] = Marks(acked: Bits(text: try row.decode("acked")),
                                                                  moved: Bits(text: try row.decode("moved")),
                                                                  claimed: try row.decode("claimed"))
        }
        return marks
    }

    /// Moves block jobs out to `job_rows` (a failure, a release): each keeps its id, recipient,
    /// reason and privacy, and takes the state, attempt and time given (`delay` ms from now; nil:
    /// the block's creation, its old place). Sets their moved bits and ends the leases left with
    /// nothing to do. The marks must be locked (`lockMarks`).
    /// A job moved out: its new state, attempt, delay and error, and (direct delivery's
    /// retries) the devices already done, as a JSON array's text.
    package struct Move {
        package let id: Int64
        package let state: JobQueue.State
        package let attempt: Int
        package let delay: Int64?
        package let error: String?
        package let done: String?
    }

    package static func moveOut(app: String, _ jobs: [Move], on connection: PostgresConnection) throws {
        guard !jobs.isEmpty else { return }
        try connection.query("""
            WITH x AS (
                SELECT * FROM unnest(\(jobs.map(\.id))::bigint[], \(jobs.map(\.state.rawValue))::text[], \(jobs.map(\.attempt))::int[], \(jobs.map(\.delay))::bigint[], \(jobs.map(\.error))::text[], \(jobs.map(\.done))::text[])
                              AS x(id, state, attempt, delay, error, done)
            ), moved AS (
                INSERT INTO job_rows (id, app, message_id, recipient, event_source, event_id, event_type, reason, privacy,
                                      state, attempt, created_at, available_at, last_error, updated_at, delivered_devices)
                SELECT x.id, b.app, b.message_id, b.recipients[p.n], b.event_source, b.event_id, b.event_type,
                       herald_reason_name(b.reasons[p.n]), b.privacy[p.n], x.state, x.attempt, b.created_at,
                       coalesce(herald_now_ms() + x.delay, b.created_at), x.error, herald_now_ms(),
                       CASE WHEN x.done IS NOT NULL THEN ARRAY(SELECT json_array_elements_text(x.done::json)) END
                  FROM x CROSS JOIN LATERAL (SELECT (x.id % 1024)::int + 1 AS n) p
                  JOIN job_blocks b ON b.app = \(app) AND b.id = x.id / 1024
                RETURNING 1
            )
            UPDATE job_block_marks k SET moved = k.moved | m.mask
              FROM (SELECT x.id / 1024 AS block, bit_or(herald_bit((x.id % 1024)::int + 1)) AS mask FROM x GROUP BY 1) m
             WHERE k.app = \(app) AND k.block = m.block
            """)
        try endSettledLeases(app: app, blocks: jobs.map { place($0.id).block }, on: connection)
    }

    /// Whether `uid`'s notification job (kind null) of message `message` was ever claimed (attempt
    /// above 0), whichever its event: a moved job's row first, else its block's position, found by
    /// array_position (a C loop over the block's recipients). An SQL condition for clear jobs, one
    /// pair at a time; `message` and `uid` are SQL (a column, or a bound value).
    ///
    /// A fragment rather than the SQL function `herald_message_jobs` it replaces: on Citus a
    /// function inlined into a statement sent whole to a worker reads the worker's empty
    /// placeholder tables, and answered "never claimed" for every job.
    package static func wasClaimed(app: String, message: SQL, uid: SQL) -> SQL {
        """
        coalesce((SELECT r.attempt > 0 FROM job_rows r
                   WHERE r.app = \(app) AND r.message_id = \(message) AND r.recipient = \(uid) AND r.kind IS NULL LIMIT 1),
                 EXISTS (SELECT 1 FROM job_blocks b CROSS JOIN LATERAL (SELECT array_position(b.recipients, \(uid)) AS i) p
                          WHERE b.app = \(app) AND b.message_id = \(message) AND p.i IS NOT NULL AND p.i <= b.claimed))
        """
    }

    /// Deletes the lease ranges of `blocks` whose every position is acked or moved.
    package static func endSettledLeases(app: String, blocks: [Int64], on connection: PostgresConnection) throws {
        try connection.query("""
            DELETE FROM job_leases l USING job_block_marks k
             WHERE k.app = \(app) AND k.block = ANY (\(Array(Set(blocks)))::bigint[]) AND l.app = \(app) AND l.block = k.block
               AND bit_count(substring(k.acked | k.moved FROM l.first + 1 FOR l.last - l.first)) = l.last - l.first
            """)
    }
}

extension Routing.Reason {
    /// The code a block stores: the position in `allCases` (append only: `herald_reason_name`
    /// in `sql/0024_job_blocks.sql` lists the same names in the same order).
    package var code: Int { Self.allCases.firstIndex(of: self)! }
}
