import HeraldDomain
import Postgres

/// SPEC §11.4, deletions: when a message is deleted, its jobs that no worker claimed are
/// cancelled (`MessageDeletedHandler`), and each recipient who already had one of its jobs claimed — or
/// one of its replies', for a parent — gets one `retract` job: no notification, `data`
/// `{messageId, parentMessageId, collapseIds}` (the latest 100; a reaction's notification is
/// collapsed under the reaction's id), so push senders remove what is shown. Retractions skip preferences and quiet rules; the app setting `messageDeleted:
/// DONT_NOTIFY` turns them off, and a stale deletion (SPEC §11.5) makes none.
///
/// One per (deletion event, recipient), through the jobs' unique key: a redelivered deletion
/// makes no second one.
package enum Retractions {
    package struct Deletion {
        package let event: IncomingEvent
        package let message: DomainEvent.MessageDeleted
    }

    package static let maxCollapseIDs = 100

    /// Makes the retract jobs of these deletions, after their unclaimed jobs were cancelled, in
    /// the caller's transaction. Returns how many were made.
    package static func make(app: String, deletions: [Deletion], appSettings: BatchSettings, on connection: PostgresConnection) throws -> Int {
        let due = try dueNow(deletions, appSettings: appSettings, setting: \.messageDeleted, time: \.message.deletedAt)
        guard !due.isEmpty else { return 0 }
        // The rows first (MATERIALIZED), then the insert: Citus 13 plans an INSERT … SELECT over
        // a UNION (the `jobs` view is one) only from a CTE's result.
        let rows = try connection.query("""
            WITH made AS MATERIALIZED (
            SELECT \(app) AS app, x.id, j.recipient, x.source, x.event_id,
                   (array_agg(DISTINCT coalesce(j.subject_id, m.id) ORDER BY coalesce(j.subject_id, m.id) DESC))[1:\(maxCollapseIDs)] AS clear_ids
              FROM unnest(\(due.map(\.message.id))::text[], \(due.map(\.event.source))::text[], \(due.map(\.event.id))::text[]) AS x(id, source, event_id)
             CROSS JOIN LATERAL (SELECT id FROM messages WHERE app = \(app) AND id = x.id
                                 UNION SELECT id FROM messages WHERE app = \(app) AND parent_id = x.id) m
              -- notifications of the messages and of reactions to them (whose collapse id is the reaction's)
              JOIN jobs j ON j.app = \(app) AND j.message_id = m.id AND (j.kind IS NULL OR j.kind = 'reaction')
                         AND j.state IN ('leased', 'acked')
             GROUP BY x.id, x.source, x.event_id, j.recipient)
            INSERT INTO job_rows (app, message_id, recipient, event_source, event_id, event_type, reason, kind, clear_ids)
            SELECT made.app, made.id, made.recipient, made.source, made.event_id, 'message.deleted', 'deleted', 'retract', made.clear_ids
              FROM made
            ON CONFLICT DO NOTHING
            """)
        return rows.affectedRows
    }
}
