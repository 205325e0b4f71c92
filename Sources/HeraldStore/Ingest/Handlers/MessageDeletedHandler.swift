import HeraldDomain
import Postgres

/// message.deleted (SPEC §11.4): the earliest deletion of each message is stored (before the
/// round's new messages, so that a reply counted as unread before this round is uncounted); the
/// unclaimed jobs of a deleted message (and of its replies) are cancelled and the recipients
/// already pushed one get a retraction.
struct MessageDeletedHandler: IngestHandler {
    let app: String
    /// One per message id: the earliest, with the event that brought it.
    private(set) var deletions: [[UInt8]: (event: IncomingEvent, message: DomainEvent.MessageDeleted)] = [:]

    init(app: String) { self.app = app }

    mutating func add(_ message: DomainEvent.MessageDeleted, event: IncomingEvent) {
        let key = Array(message.id.utf8)
        if let existing = deletions[key], existing.message.deletedAt <= message.deletedAt { return }
        deletions[key] = (event, message)
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !deletions.isEmpty else { return }
        let d = deletions.values.map(\.message)
        let rows = try connection.query("""
            WITH input AS (
                SELECT * FROM unnest(\(d.map(\.id))::text[], \(d.map { $0.conversation?.id })::text[], \(d.map { $0.conversation?.receiverType })::text[], \(d.map { $0.conversation?.groupID })::text[], \(d.map(\.parentID))::text[], \(d.map(\.deletedAt))::bigint[])
                    AS x(id, conversation_id, receiver_type, group_id, parent_id, deleted_at)
            ),
            -- MATERIALIZED: read before `upsert` writes (Citus runs an inlined CTE after the insert)
            was_live AS MATERIALIZED (
                SELECT m.id FROM input i
                 CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(app) AND m.id = i.id OFFSET 0) m
                 WHERE m.created_seen AND m.deleted_at IS NULL AND m.parent_id IS NOT NULL
            ),
            upsert AS (
                INSERT INTO messages AS m (app, id, conversation_id, receiver_type, group_id, parent_id, deleted_at)
                SELECT \(app), i.* FROM input i
                ON CONFLICT (app, id) DO UPDATE
                    SET deleted_at = least(coalesce(m.deleted_at, EXCLUDED.deleted_at), EXCLUDED.deleted_at)
            )
            SELECT id FROM was_live
            """)
        round.deletedReplies = try rows.map { try $0.decode(0, as: String.self) }
        for m in d {
            round.touchedThreads.insert(m.threadID)
            round.recount.insert(m.threadID)
        }
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        guard !deletions.isEmpty else { return 0 }
        // A deleted message's jobs that no worker has claimed are cancelled (a parent's: its
        // replies' too), found by message through the jobs' unique key.
        try connection.send("""
            WITH doomed AS (SELECT ARRAY(SELECT unnest(\(deletions.values.map(\.message.id))::text[])
                                         UNION SELECT m.id FROM messages m WHERE m.app = \(app) AND m.parent_id = ANY (\(deletions.values.map(\.message.id))::text[])) AS ids),
            blocks AS (UPDATE job_blocks SET stop = claimed
                        WHERE app = \(app) AND message_id IN (SELECT unnest(ids) FROM doomed) AND claimed < stop)
            UPDATE job_rows SET state = 'cancelled', updated_at = herald_now_ms()
             WHERE app = \(app) AND state = 'ready' AND message_id IN (SELECT unnest(ids) FROM doomed)
            """)
        // Recipients who had already been pushed one of those messages get a retraction (SPEC §11.4).
        return try Retractions.make(app: app, deletions: deletions.values.map { Retractions.Deletion(event: $0.event, message: $0.message) },
                                    appSettings: round.settings, on: connection)
    }
}

/// group.deleted: the group's earliest deletion is stored and its threads recomputed (they are
/// hidden); the unclaimed jobs of its messages and member actions are cancelled.
struct GroupDeletedHandler: IngestHandler {
    let app: String
    private(set) var deletions: [String: Int64] = [:]

    init(app: String) { self.app = app }

    mutating func add(group: String, at: Int64) {
        deletions[group] = min(deletions[group] ?? at, at)
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !deletions.isEmpty else { return }
        let rows = try connection.query("""
            WITH d AS (
                INSERT INTO deleted_groups AS d (app, group_id, deleted_at)
                SELECT \(app), g, a FROM unnest(\(Array(deletions.keys))::text[], \(Array(deletions.values))::bigint[]) AS x(g, a)
                ON CONFLICT (app, group_id) DO UPDATE SET deleted_at = least(d.deleted_at, EXCLUDED.deleted_at)
            )
            SELECT parent_id FROM threads WHERE app = \(app) AND group_id = ANY (\(Array(deletions.keys))::text[])
            """)
        for row in rows {
            let thread = try row.decode(0, as: String.self)
            round.touchedThreads.insert(thread)
            round.recount.insert(thread)
        }
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        guard !deletions.isEmpty else { return 0 }
        try connection.send("""
            WITH doomed AS (SELECT ARRAY(SELECT m.id FROM messages m
                                          WHERE m.app = \(app) AND m.group_id = ANY (\(Array(deletions.keys))::text[]) AND m.created_seen) AS ids),
            blocks AS (UPDATE job_blocks SET stop = claimed
                        WHERE app = \(app) AND message_id IN (SELECT unnest(ids) FROM doomed) AND claimed < stop)
            UPDATE job_rows SET state = 'cancelled', updated_at = herald_now_ms()
             WHERE app = \(app) AND state = 'ready' AND message_id IN (SELECT unnest(ids) FROM doomed)
            """)
        // and its member actions' (which name no message)
        try connection.send("""
            UPDATE job_rows j SET state = 'cancelled', updated_at = herald_now_ms()
              FROM member_actions a
             WHERE a.app = \(app) AND a.group_id = ANY (\(Array(deletions.keys))::text[])
               AND j.app = \(app) AND j.message_id IS NULL AND j.kind = 'memberAction' AND j.state = 'ready'
               AND j.event_source = a.event_source AND j.event_id = a.event_id
            """)
        return 0
    }
}
