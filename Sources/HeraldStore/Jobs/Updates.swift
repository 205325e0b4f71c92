import HeraldDomain
import Postgres

/// SPEC §11.4, edits: an edited message's jobs that no worker claimed show the new text when
/// they are claimed (`JobPayload` builds the body from the message's row then). Each recipient
/// whose job was already claimed or acked gets one `update` job: reason `edited`, the same
/// `collapseId`, the new body in the template of the job it updates, `notification.silent:
/// true`. A user the edit newly mentions gets the mention job instead (`Fanout.runEdits` runs
/// first; both would have the same key, so the update is not made). Updates skip preferences
/// and quiet rules; `messageEdited: DONT_NOTIFY` turns them off, and a stale edit makes none.
package enum Updates {
    /// Makes the update jobs of these edits, after the edits' mention jobs, in the caller's
    /// transaction. Returns how many were made.
    package static func make(app: String, edits: [(event: IncomingEvent, edit: DomainEvent.MessageEdited)], appSettings: BatchSettings,
                     on connection: PostgresConnection) throws -> Int {
        let due = try dueNow(edits, appSettings: appSettings, setting: \.messageEdited, time: \.edit.editedAt)
        guard !due.isEmpty else { return 0 }
        // The rows first (MATERIALIZED), then the insert: Citus 13 plans an INSERT … SELECT over
        // a UNION (the `jobs` view is one) only from a CTE's result.
        let rows = try connection.query("""
            WITH made AS MATERIALIZED (
            SELECT DISTINCT ON (x.id, x.source, x.event_id, j.recipient)
                   \(app) AS app, x.id, j.recipient, x.source, x.event_id, j.privacy, j.badge, j.reason
              FROM unnest(\(due.map(\.edit.id))::text[], \(due.map(\.event.source))::text[], \(due.map(\.event.id))::text[]) AS x(id, source, event_id)
              JOIN messages m ON m.app = \(app) AND m.id = x.id AND \(Visibility.undeleted(app: app))
              JOIN jobs j ON j.app = \(app) AND j.message_id = x.id AND j.kind IS NULL AND j.state IN ('leased', 'acked')
             -- the newly mentioned have the edit's mention job instead (a block of the edit's event)
             WHERE NOT EXISTS (SELECT 1 FROM job_blocks b
                                WHERE b.app = \(app) AND b.message_id = x.id AND b.event_source = x.source AND b.event_id = x.event_id
                                  AND j.recipient = ANY (b.recipients))
             ORDER BY x.id, x.source, x.event_id, j.recipient, j.id)
            INSERT INTO job_rows (app, message_id, recipient, event_source, event_id, event_type, reason, kind, privacy, badge, template_reason)
            SELECT made.app, made.id, made.recipient, made.source, made.event_id, 'message.edited', 'edited', 'update', made.privacy,
                   made.badge, made.reason
              FROM made
            ON CONFLICT DO NOTHING
            """)
        return rows.affectedRows
    }
}

/// The events of `items` that make update or retract jobs now (SPEC §11.4): the app's
/// `setting` is NOTIFY, and the event's own time is not stale (SPEC §11.5).
package func dueNow<T>(_ items: [T], appSettings: BatchSettings, setting: KeyPath<AppSettings, AppSettings.Notice>,
               time: (T) -> Int64) throws -> [T] {
    guard !items.isEmpty else { return [] }
    let settings = try appSettings.get()
    guard settings[keyPath: setting] == .notify else { return [] }
    return items.filter { !settings.age(of: time($0), appliedAt: appSettings.appliedAt).isStale }
}
