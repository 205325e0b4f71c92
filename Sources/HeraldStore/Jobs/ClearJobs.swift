import HeraldDomain
import Postgres

/// SPEC §13.2: when a read moves past replies whose jobs were already claimed, the reader gets
/// one `clear` job per thread — the collapse ids of those replies (the latest 100) and the
/// reader's badge after the read — without the device that read (`deviceId`), so that a push
/// sender removes the notifications from the reader's other devices.
///
/// One clear job per (thread, reader, read position): its event is `thread.read` from source
/// `herald`, with the id `read:<reply id read up to>`, so a retried read makes no second one.
package enum ClearJobs {
    /// A thread whose read mark moved: from (`fromAt`, `fromID`) (nil: never marked) to (`toAt`, `toID`).
    package struct Move {
        package let thread: String
        package let fromAt: Int64?
        package let fromID: String?
        package let toAt: Int64
        package let toID: String

        package init(thread: String, fromAt: Int64?, fromID: String?, toAt: Int64, toID: String) {
            self.thread = thread
            self.fromAt = fromAt
            self.fromID = fromID
            self.toAt = toAt
            self.toID = toID
        }
    }

    package static let maxCollapseIDs = 100

    /// Makes the clear jobs of these moves, in the caller's transaction, after the reader's
    /// inbox was refreshed (the badge is read from it). Returns how many were made.
    package static func make(app: String, uid: String, deviceID: String?, moves: [Move], on connection: PostgresConnection) throws -> Int {
        guard !moves.isEmpty else { return 0 }
        // Two statements, what to clear and then the jobs: Citus 13 plans neither this INSERT …
        // SELECT (its look-ups of a reader's jobs are a UNION) nor it behind a CTE.
        let found = try connection.query("""
            SELECT x.thread, x.to_id, array_to_json((coalesce(d.ids, '{}') || coalesce(c.ids, '{}'))[1:\(maxCollapseIDs)])::text AS ids,
                   b.badge
              FROM unnest(\(moves.map(\.thread))::text[], \(moves.map(\.fromAt))::bigint[], \(moves.map(\.fromID))::text[], \(moves.map(\.toAt))::bigint[], \(moves.map(\.toID))::text[]) AS x(thread, from_at, from_id, to_at, to_id)
             CROSS JOIN LATERAL (
                   SELECT array_agg(r.id ORDER BY r.sent_at DESC, r.id COLLATE "C" DESC) AS ids
                     FROM (SELECT m.id, m.sent_at
                             FROM messages m
                            WHERE m.app = \(app) AND m.parent_id = x.thread
                              AND (m.sent_at, m.id COLLATE "C") <= (x.to_at, x.to_id COLLATE "C")
                              AND (x.from_at IS NULL OR (m.sent_at, m.id COLLATE "C") > (x.from_at, x.from_id COLLATE "C"))
                              AND \(JobBlocks.wasClaimed(app: app, message: "m.id", uid: "\(uid)"))
                            ORDER BY m.sent_at DESC, m.id COLLATE "C" DESC
                            LIMIT \(maxCollapseIDs)) r) c
             -- SPEC §17: the push that opened a digest window of the reader's, and the digest that
             -- replaced it, show under the thread's id: it is cleared when the read passes either
              LEFT JOIN LATERAL (
                   SELECT ARRAY[x.thread] AS ids WHERE EXISTS (
                       SELECT 1 FROM digest_windows w
                         JOIN messages o ON o.app = \(app) AND o.id = w.opened_by
                         LEFT JOIN job_rows dj ON dj.app = \(app) AND dj.id = w.digest_job
                         LEFT JOIN messages dm ON dm.app = \(app) AND dm.id = dj.message_id
                        WHERE w.app = \(app) AND w.thread_id = x.thread AND w.uid = \(uid)
                          AND EXISTS (SELECT 1 FROM (VALUES (o.sent_at, o.id), (dm.sent_at, dm.id)) AS p(at, id)
                                       WHERE p.id IS NOT NULL
                                         AND (p.at, p.id COLLATE "C") <= (x.to_at, x.to_id COLLATE "C")
                                         AND (x.from_at IS NULL OR (p.at, p.id COLLATE "C") > (x.from_at, x.from_id COLLATE "C"))))) d ON true
             CROSS JOIN (SELECT count(*)::int AS badge FROM subscriptions
                          WHERE app = \(app) AND uid = \(uid) AND visible AND has_unread) b
             WHERE c.ids IS NOT NULL OR d.ids IS NOT NULL
            """)
        guard !found.isEmpty else { return 0 }
        var threads: [String] = [], reads: [String] = [], ids: [String] = [], badges: [Int] = []
        for row in found {
            threads.append(try row.decode("thread"))
            reads.append("read:" + (try row.decode("to_id", as: String.self)))
            ids.append(try row.decode("ids"))
            badges.append(try row.decode("badge"))
        }
        let rows = try connection.query("""
            INSERT INTO job_rows (app, message_id, recipient, event_source, event_id, event_type, reason, kind, exclude_device,
                                  clear_ids, badge)
            SELECT \(app), x.thread, \(uid), 'herald', x.read, 'thread.read', 'read', 'clear', \(deviceID),
                   ARRAY(SELECT json_array_elements_text(x.ids::json)), x.badge
              FROM unnest(\(threads)::text[], \(reads)::text[], \(ids)::text[], \(badges)::int[]) AS x(thread, read, ids, badge)
            ON CONFLICT DO NOTHING
            """)
        return rows.affectedRows
    }
}
