import HeraldDomain
import Postgres

/// What the pin and save lists and the message lookup show (SPEC §12.2), each row a cursor
/// position and the item's JSON, built by PostgreSQL.
package enum PinLists {
    /// The conversation's pinned messages, newest first, after the position `after`.
    package static func pins(app: String, conversation: String, after: (at: Int64, id: String)?, limit: Int,
                             on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT p.at || '/' || p.message_id,
                   jsonb_build_object('messageId', m.id, 'parentMessageId', m.parent_id, 'sender', m.sender, 'sentAt', m.sent_at,
                                      'text', m.text, 'pinnedAt', p.at, 'pinnedBy', p.pinned_by,
                                      'parent', (SELECT jsonb_build_object('id', pm.id, 'text', pm.text, 'sender', pm.sender,
                                                                           'sentAt', pm.sent_at)
                                                   FROM messages pm WHERE pm.app = \(app) AND pm.id = m.parent_id))::text
              FROM message_pins p
              JOIN messages m ON m.app = \(app) AND m.id = p.message_id
             WHERE p.app = \(app) AND p.pinned AND (p.conversation_id = \(conversation) OR (p.conversation_id IS NULL AND m.conversation_id = \(conversation)))
               AND \(Visibility.live(app: app))
               AND (\(after?.at)::bigint IS NULL OR p.at < \(after?.at) OR (p.at = \(after?.at) AND p.message_id COLLATE "C" < \(after?.id)::text COLLATE "C"))
             ORDER BY p.at DESC, p.message_id COLLATE "C" DESC
             LIMIT \(limit)
            """)
    }

    /// The user's saved messages they can still see, newest first, after the position `after`.
    package static func saved(app: String, uid: String, after: (at: Int64, id: String)?, limit: Int,
                              on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT s.at || '/' || s.message_id,
                   jsonb_build_object('messageId', m.id, 'parentMessageId', m.parent_id, 'conversationId', m.conversation_id,
                                      'receiverType', m.receiver_type,
                                      'receiver', coalesce(m.group_id, CASE WHEN m.user_a = \(uid) THEN m.user_b ELSE m.user_a END),
                                      'sentAt', m.sent_at, 'sender', m.sender, 'text', m.text, 'savedAt', s.at)::text
              FROM message_saves s
              JOIN messages m ON m.app = \(app) AND m.id = s.message_id
             WHERE s.app = \(app) AND s.uid = \(uid) AND s.saved AND \(Visibility.live(app: app)) AND \(Visibility.access("m", uid: "\(uid)", app: app))
               AND (\(after?.at)::bigint IS NULL OR s.at < \(after?.at) OR (s.at = \(after?.at) AND s.message_id COLLATE "C" < \(after?.id)::text COLLATE "C"))
             ORDER BY s.at DESC, s.message_id COLLATE "C" DESC
             LIMIT \(limit)
            """)
    }

    /// The user's pinned conversations: system pins of their groups first, then their own, each
    /// newest first, after the position `after`.
    package static func pinnedConversations(app: String, uid: String, after: (segment: Int, at: Int64, id: String)?, limit: Int,
                                            on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT c.segment || '/' || c.at || '/' || c.conversation_id,
                   jsonb_build_object('conversationId', c.conversation_id, 'receiverType', c.receiver_type,
                                      'receiver', coalesce(c.group_id, CASE WHEN c.user_a = \(uid) THEN c.user_b ELSE c.user_a END),
                                      'pinnedAt', c.at, 'pinnedBy', c.owner)::text
              FROM (SELECT r.*, CASE WHEN r.owner = 'app_system' THEN 0 ELSE 1 END AS segment FROM conversation_pins r
                     WHERE r.app = \(app) AND r.owner IN ('app_system', \(uid)) AND r.pinned) c
             WHERE \(Visibility.access("c", uid: "\(uid)", app: app))
               AND NOT EXISTS (SELECT 1 FROM deleted_groups d WHERE d.app = \(app) AND d.group_id = c.group_id)
               AND (\(after?.segment)::int IS NULL OR c.segment > \(after?.segment)
                    OR (c.segment = \(after?.segment) AND (c.at < \(after?.at) OR (c.at = \(after?.at) AND c.conversation_id COLLATE "C" < \(after?.id)::text COLLATE "C"))))
             ORDER BY c.segment, c.at DESC, c.conversation_id COLLATE "C" DESC
             LIMIT \(limit)
            """)
    }

    /// The pin, save and thread-subscription state of each message of `ids` the user can see, as
    /// one JSON object by message id.
    package static func lookup(app: String, uid: String, ids: [String], on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT jsonb_object_agg(m.id, jsonb_build_object(
                       'pinnedAt', CASE WHEN p.pinned THEN p.at ELSE 0 END,
                       'pinnedBy', CASE WHEN p.pinned THEN p.pinned_by END,
                       'savedAt', CASE WHEN s.saved THEN s.at ELSE 0 END,
                       'threadSubscribed', coalesce(sub.subscribed, false)))::text
              FROM (SELECT DISTINCT unnest(\(ids)::text[]) AS id) q
              CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(app) AND m.id = q.id OFFSET 0) m
              LEFT JOIN message_pins p ON p.app = \(app) AND p.message_id = m.id
              LEFT JOIN message_saves s ON s.app = \(app) AND s.uid = \(uid) AND s.message_id = m.id
              LEFT JOIN subscriptions sub ON sub.app = \(app) AND sub.uid = \(uid) AND sub.thread_id = coalesce(m.parent_id, m.id)
             WHERE \(Visibility.live(app: app)) AND \(Visibility.access("m", uid: "\(uid)", app: app))
            """)
    }
}
