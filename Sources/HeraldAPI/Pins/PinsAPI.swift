import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §12.2 (server role): a conversation's pinned messages, a user's saved messages and pinned
/// conversations, and the per-viewer state of a message list. Deleted messages (and messages of
/// deleted threads and groups) are unpinned and unsaved for everyone: they are left out.
package enum PinsAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/conversations/{conversationId}/pins", Route(access: .server, handler: conversationPins))
        router.add(.get, "/v1/users/{uid}/saved", Route(access: .server, handler: saved))
        router.add(.get, "/v1/users/{uid}/pinned-conversations", Route(access: .server, handler: pinnedConversations))
        router.add(.post, "/v1/users/{uid}/messages/lookup", Route(access: .server, accepts: Route.json, handler: lookup))
    }

    /// A cursor's `<time>/<id>` position (ids hold no '/'), or nil.
    package static func position(_ list: ListParameters, kind: String) throws(HTTPError) -> (at: Int64, id: String)? {
        guard let text = try list.position(kind: kind) else { return nil }
        guard let slash = text.firstIndex(of: "/"), let at = Int64(text[..<slash]) else {
            throw HTTPError.badRequest("cursor is not valid for this list", field: "cursor")
        }
        return (at, String(text[text.index(after: slash)...]))
    }

    package static func conversationPins(_ context: Context) throws -> Response {
        let conversation = try Identifier.validateConversation(context.parameter("conversationId"), field: "conversationId")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try position(list, kind: "pins")
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                SELECT p.at || '/' || p.message_id,
                       jsonb_build_object('messageId', m.id, 'parentMessageId', m.parent_id, 'sender', m.sender, 'sentAt', m.sent_at,
                                          'text', m.text, 'pinnedAt', p.at, 'pinnedBy', p.pinned_by,
                                          'parent', (SELECT jsonb_build_object('id', pm.id, 'text', pm.text, 'sender', pm.sender,
                                                                               'sentAt', pm.sent_at)
                                                       FROM messages pm WHERE pm.app = \(context.app) AND pm.id = m.parent_id))::text
                  FROM message_pins p
                  JOIN messages m ON m.app = \(context.app) AND m.id = p.message_id
                 WHERE p.app = \(context.app) AND p.pinned AND (p.conversation_id = \(conversation) OR (p.conversation_id IS NULL AND m.conversation_id = \(conversation)))
                   AND \(Visibility.live)
                   AND (\(after?.at)::bigint IS NULL OR p.at < \(after?.at) OR (p.at = \(after?.at) AND p.message_id COLLATE "C" < \(after?.id)::text COLLATE "C"))
                 ORDER BY p.at DESC, p.message_id COLLATE "C" DESC
                 LIMIT \(list.limit + 1)
                """)
        }
        return try list.page(rows, kind: "pins")
    }

    package static func saved(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try position(list, kind: "saved")
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                SELECT s.at || '/' || s.message_id,
                       jsonb_build_object('messageId', m.id, 'parentMessageId', m.parent_id, 'conversationId', m.conversation_id,
                                          'receiverType', m.receiver_type,
                                          'receiver', coalesce(m.group_id, CASE WHEN m.user_a = \(uid) THEN m.user_b ELSE m.user_a END),
                                          'sentAt', m.sent_at, 'sender', m.sender, 'text', m.text, 'savedAt', s.at)::text
                  FROM message_saves s
                  JOIN messages m ON m.app = \(context.app) AND m.id = s.message_id
                 WHERE s.app = \(context.app) AND s.uid = \(uid) AND s.saved AND \(Visibility.live) AND \(Visibility.access("m", uid: "\(uid)"))
                   AND (\(after?.at)::bigint IS NULL OR s.at < \(after?.at) OR (s.at = \(after?.at) AND s.message_id COLLATE "C" < \(after?.id)::text COLLATE "C"))
                 ORDER BY s.at DESC, s.message_id COLLATE "C" DESC
                 LIMIT \(list.limit + 1)
                """)
        }
        return try list.page(rows, kind: "saved")
    }

    /// System pins of the user's groups first, then the user's own, each newest first.
    package static func pinnedConversations(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        var after: (segment: Int, at: Int64, id: String)?
        if let text = try list.position(kind: "pinned-conversations") {
            let parts = text.split(separator: "/", maxSplits: 2).map(String.init)
            guard parts.count == 3, let segment = Int(parts[0]), let at = Int64(parts[1]) else {
                throw HTTPError.badRequest("cursor is not valid for this list", field: "cursor")
            }
            after = (segment, at, parts[2])
        }
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                SELECT c.segment || '/' || c.at || '/' || c.conversation_id,
                       jsonb_build_object('conversationId', c.conversation_id, 'receiverType', c.receiver_type,
                                          'receiver', coalesce(c.group_id, CASE WHEN c.user_a = \(uid) THEN c.user_b ELSE c.user_a END),
                                          'pinnedAt', c.at, 'pinnedBy', c.owner)::text
                  FROM (SELECT r.*, CASE WHEN r.owner = 'app_system' THEN 0 ELSE 1 END AS segment FROM conversation_pins r
                         WHERE r.app = \(context.app) AND r.owner IN ('app_system', \(uid)) AND r.pinned) c
                 WHERE \(Visibility.access("c", uid: "\(uid)"))
                   AND NOT EXISTS (SELECT 1 FROM deleted_groups d WHERE d.app = \(context.app) AND d.group_id = c.group_id)
                   AND (\(after?.segment)::int IS NULL OR c.segment > \(after?.segment)
                        OR (c.segment = \(after?.segment) AND (c.at < \(after?.at) OR (c.at = \(after?.at) AND c.conversation_id COLLATE "C" < \(after?.id)::text COLLATE "C"))))
                 ORDER BY c.segment, c.at DESC, c.conversation_id COLLATE "C" DESC
                 LIMIT \(list.limit + 1)
                """)
        }
        return try list.page(rows, kind: "pinned-conversations")
    }

    /// Per viewer, for a message list: pin, save and thread subscription of each id the user can
    /// see; unknown, deleted and inaccessible ids are left out.
    package static func lookup(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let ids = try SubscriptionsAPI.messageIDs(context)
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                SELECT jsonb_object_agg(m.id, jsonb_build_object(
                           'pinnedAt', CASE WHEN p.pinned THEN p.at ELSE 0 END,
                           'pinnedBy', CASE WHEN p.pinned THEN p.pinned_by END,
                           'savedAt', CASE WHEN s.saved THEN s.at ELSE 0 END,
                           'threadSubscribed', coalesce(sub.subscribed, false)))::text
                  FROM (SELECT DISTINCT unnest(\(ids)::text[]) AS id) q
                  CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(context.app) AND m.id = q.id OFFSET 0) m
                  LEFT JOIN message_pins p ON p.app = \(context.app) AND p.message_id = m.id
                  LEFT JOIN message_saves s ON s.app = \(context.app) AND s.uid = \(uid) AND s.message_id = m.id
                  LEFT JOIN subscriptions sub ON sub.app = \(context.app) AND sub.uid = \(uid) AND sub.thread_id = coalesce(m.parent_id, m.id)
                 WHERE \(Visibility.live) AND \(Visibility.access("m", uid: "\(uid)"))
                """)
        }
        return .json(RawJSON("{\"data\":" + ((try rows.first?.decode(0, as: String?.self)) ?? nil ?? "{}") + "}"))
    }
}
