import HeraldDomain
import Postgres

/// Conversation levels (SPEC §18): a user's level per conversation, set, removed and listed.
package enum ConversationLevelStore {
    /// The JSON of one level (`l` a conversation_levels row).
    static let itemJSON: SQL = "jsonb_build_object('conversationId', l.conversation_id, 'level', l.level, 'updatedAt', l.updated_at)::text"

    /// Whether `uid` is a member of group `group` now (the pins' visibility rule).
    package static func isGroupMember(app: String, uid: String, group: String, on connection: PostgresConnection) throws -> Bool {
        try connection.query("""
            SELECT \(Visibility.access("c", uid: "\(uid)", app: app))
              FROM (SELECT \(app)::text AS app, \(group)::text AS group_id, NULL::text AS user_a, NULL::text AS user_b) c
            """)[0].decode(0, as: Bool.self)
    }

    /// Sets the level; the same level again is no change (its time and the feed stay as they
    /// were). Returns the level's JSON.
    package static func set(app: String, uid: String, conversation: String, level: Routing.ConversationLevel,
                            on connection: PostgresConnection) throws -> String {
        try connection.query("""
            WITH put AS (
                INSERT INTO conversation_levels AS l (app, uid, conversation_id, level, updated_at)
                VALUES (\(app), \(uid), \(conversation), \(level.rawValue), herald_now_ms())
                ON CONFLICT (app, uid, conversation_id) DO UPDATE SET level = EXCLUDED.level, updated_at = EXCLUDED.updated_at
                 WHERE l.level <> EXCLUDED.level
                RETURNING l.*
            )
            SELECT \(itemJSON) FROM put l
            UNION ALL
            SELECT \(itemJSON) FROM conversation_levels l
             WHERE l.app = \(app) AND l.uid = \(uid) AND l.conversation_id = \(conversation) AND NOT EXISTS (SELECT 1 FROM put)
            """)[0].decode(0, as: String.self)
    }

    /// Removes the level; returns whether there was one.
    package static func remove(app: String, uid: String, conversation: String, on connection: PostgresConnection) throws -> Bool {
        try !connection.query("""
            DELETE FROM conversation_levels WHERE app = \(app) AND uid = \(uid) AND conversation_id = \(conversation) RETURNING 1
            """).isEmpty
    }

    /// The user's levels, newest change first (`updatedAt`, then the conversation id, both
    /// descending), after the position `after`: each row its position and its JSON.
    package static func list(app: String, uid: String, after: (at: Int64, id: String)?, limit: Int,
                             on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT l.updated_at || '/' || l.conversation_id, \(itemJSON)
              FROM conversation_levels l
             WHERE l.app = \(app) AND l.uid = \(uid)
               AND (\(after?.at)::bigint IS NULL OR l.updated_at < \(after?.at)
                    OR (l.updated_at = \(after?.at) AND l.conversation_id COLLATE "C" < \(after?.id)::text COLLATE "C"))
             ORDER BY l.updated_at DESC, l.conversation_id COLLATE "C" DESC
             LIMIT \(limit)
            """)
    }
}
