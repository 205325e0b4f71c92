import HeraldDomain
import JSON
import HTTPTypes
import Postgres

/// Explicit subscribe / unsubscribe / state (SPEC §5.2) and the bulk lookup.
package struct SubscriptionStore: Sendable {
    package init() {}

    package static let messageNotFound = HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND",
                                           message: "no such message, or it was deleted", params: ["field": "messageId"])
    package static let noAccess = HTTPError(status: 403, code: "ERR_MESSAGE_NO_ACCESS",
                                    message: "the user has no access to this conversation", params: ["field": "uid"])

    package struct State: JSONWritable, Sendable {
        package let parentMessageId: String
        package let subscribed: Bool
        package let source: String?
        package let reason: String?
        package let since: Int64?
        /// `track` (SPEC §18: in the inbox, pushed only for mentions) or `notify`.
        package var tracked = false

        /// Keys sorted; `source` and `reason` only while subscribed; `since` null when there is no row.
        package func write(to writer: inout JSONWriter) {
            writer.object { state in
                state.field("level", subscribed && tracked ? "track" : "notify")
                state.field("parentMessageId", parentMessageId)
                if subscribed { state.field("reason", reason) }
                state.key("since")
                if let since { state.value(since) } else { state.value(nil as String?) }
                if subscribed { state.field("source", source) }
                state.field("subscribed", subscribed)
            }
        }
    }

    /// A subscribe with the level it asks for (nil: keep the row's, `notify` for a new or an
    /// unsubscribed row), or an unsubscribe (which also ends a `track` level: a re-subscription
    /// starts at `notify`).
    package enum Change { case subscribe(tracked: Bool?), unsubscribe }

    /// The thread a message id belongs to, with the locks that change it; 404 when unknown or deleted.
    package func resolve(app: String, messageID: String, on connection: PostgresConnection) throws -> (thread: String, locks: LockSet) {
        let rows = try connection.query("""
            SELECT t.parent_id, t.group_id, (t.deleted_at IS NOT NULL OR coalesce(m.deleted_at IS NOT NULL, false)) AS deleted
              FROM (SELECT \(messageID)::text AS id) q
              LEFT JOIN messages m ON m.app = \(app) AND m.id = q.id AND m.created_seen
              JOIN threads t ON t.app = \(app) AND t.parent_id = coalesce(m.parent_id, q.id)
            """)
        guard let row = rows.first, try !row.decode("deleted", as: Bool.self) else { throw Self.messageNotFound }
        let thread = try row.decode("parent_id", as: String.self)
        let group = try row.decode("group_id", as: String?.self)
        var locks = LockSet()
        locks.thread(thread, group: group)
        return (thread, locks)
    }

    /// Runs `body` in a transaction holding the lock of the message's thread, re-checked under
    /// the lock (a deletion may have landed, or the thread moved to its root): `LockSet.holding`.
    package func inThread<T>(app: String, messageID: String, on connection: PostgresConnection,
                     _ body: (String, PostgresConnection) throws -> T) throws -> T {
        try LockSet.holding(app: app, on: connection, resolve: { try resolve(app: app, messageID: messageID, on: $0) }, body)
    }

    /// Whether uid can see the thread's conversation now (a current group member, or one of the two users).
    package func hasAccess(app: String, uid: String, thread: String, on connection: PostgresConnection) throws -> Bool {
        let rows = try connection.query("""
            SELECT CASE WHEN t.group_id IS NULL THEN \(uid) IN (t.user_a, t.user_b)
                        ELSE EXISTS (SELECT 1 FROM group_members g
                                      WHERE g.app = \(app) AND g.group_id = t.group_id AND g.uid = \(uid)
                                        AND g.joined_at IS NOT NULL AND herald_member_now(g.joined_at, g.removed_at)) END
              FROM threads t WHERE t.app = \(app) AND t.parent_id = \(thread)
            """)
        return try rows.first?.decode(0, as: Bool.self) ?? false
    }

    package func state(app: String, uid: String, thread: String, on connection: PostgresConnection) throws -> State {
        let rows = try connection.query("""
            SELECT subscribed, source, reason, since, tracked FROM subscriptions WHERE app = \(app) AND uid = \(uid) AND thread_id = \(thread)
            """)
        guard let row = rows.first else {
            return State(parentMessageId: thread, subscribed: false, source: nil, reason: nil, since: nil)
        }
        return State(parentMessageId: thread, subscribed: try row.decode("subscribed"), source: try row.decode("source"),
                     reason: try row.decode("reason"), since: try row.decode("since"), tracked: try row.decode("tracked"))
    }

    /// GET: the user's state for the message's thread.
    package func get(app: String, uid: String, messageID: String, on connection: PostgresConnection) throws -> State {
        let (thread, _) = try resolve(app: app, messageID: messageID, on: connection)
        guard try hasAccess(app: app, uid: uid, thread: thread, on: connection) else { throw Self.noAccess }
        return try state(app: app, uid: uid, thread: thread, on: connection)
    }

    /// PUT / DELETE: records the explicit choice at the database's clock, then recomputes the
    /// subscription from every fact (so later triggers are judged against it).
    package func change(_ change: Change, app: String, uid: String, messageID: String, on connection: PostgresConnection) throws -> State {
        try inThread(app: app, messageID: messageID, on: connection) { thread, connection in
            guard try hasAccess(app: app, uid: uid, thread: thread, on: connection) else { throw Self.noAccess }
            switch change {
            case .subscribe(let tracked):
                // Subscribing explicitly marks the thread read (SPEC §5.1.6): the mark moves to the
                // latest reply, never back. The level (SPEC §18): the one asked for, else the row's
                // while it is subscribed, else notify. (No parameter in DO UPDATE: Citus 13 loses
                // its type there. Asked for, the inserted value is the one asked for.)
                let level: SQL = tracked == nil ? "s.subscribed AND s.tracked" : "EXCLUDED.tracked"
                try connection.query("""
                    INSERT INTO subscriptions AS s (app, uid, thread_id, subscribed, source, reason, since, manual_at,
                                                    mark_at, mark_id, updated_at, tracked)
                    SELECT \(app), \(uid), \(thread), true, 'manual', 'manual', herald_now_ms(), herald_now_ms(),
                           t.last_reply_at, t.last_reply_id, herald_now_ms(), coalesce(\(tracked)::boolean, false)
                      FROM threads t WHERE t.app = \(app) AND t.parent_id = \(thread)
                    ON CONFLICT (app, uid, thread_id) DO UPDATE SET
                        tracked = \(level),
                        manual_at = coalesce(s.manual_at, EXCLUDED.manual_at),
                        mark_at = CASE WHEN s.manual_at IS NOT NULL OR EXCLUDED.mark_at IS NULL
                                         OR (s.mark_at, s.mark_id) >= (EXCLUDED.mark_at, EXCLUDED.mark_id)
                                       THEN s.mark_at ELSE EXCLUDED.mark_at END,
                        mark_id = CASE WHEN s.manual_at IS NOT NULL OR EXCLUDED.mark_at IS NULL
                                         OR (s.mark_at, s.mark_id) >= (EXCLUDED.mark_at, EXCLUDED.mark_id)
                                       THEN s.mark_id ELSE EXCLUDED.mark_id END
                    """)
            case .unsubscribe:
                // The unsubscribe takes effect now, and also over any trigger already received that is
                // dated later (a bus clock running ahead): what the user asked for holds.
                try connection.query("""
                    INSERT INTO subscriptions AS s (app, uid, thread_id, subscribed, since, unsubscribed_at, updated_at)
                    SELECT \(app), \(uid), \(thread), false, u.at, u.at, herald_now_ms()
                      FROM (SELECT greatest(herald_now_ms(),
                                            (SELECT max(r.sent_at) FROM messages r
                                              WHERE r.app = \(app) AND r.parent_id = \(thread) AND r.sender = \(uid) AND r.created_seen),
                                            (SELECT max(mn.at) FROM mentions mn
                                              WHERE mn.app = \(app) AND mn.thread_id = \(thread) AND mn.uid = \(uid))) AS at) u
                    ON CONFLICT (app, uid, thread_id) DO UPDATE SET unsubscribed_at = EXCLUDED.unsubscribed_at, manual_at = NULL,
                                                                     tracked = false
                    -- idempotent (SPEC §5.2): a thread already unsubscribed from stays as it was
                    WHERE s.subscribed OR s.manual_at IS NOT NULL OR s.unsubscribed_at IS NULL
                    """)
            }
            try connection.query("SELECT herald_recompute_subscriptions(\(app), ARRAY[\(uid)::text], ARRAY[\(thread)::text])")
            try connection.query("SELECT herald_refresh_inbox(\(app), ARRAY[\(uid)::text], ARRAY[\(thread)::text])")
            return try state(app: app, uid: uid, thread: thread, on: connection)
        }
    }

    /// The subscribed state of each message's thread; unknown, deleted or inaccessible → false.
    package func lookup(app: String, uid: String, messageIDs: [String], on connection: PostgresConnection) throws -> [(String, Bool)] {
        let rows = try connection.query("""
            SELECT q.id,
                   coalesce(s.subscribed AND t.deleted_at IS NULL AND m.deleted_at IS NULL
                            AND CASE WHEN t.group_id IS NULL THEN \(uid) IN (t.user_a, t.user_b)
                                     ELSE coalesce(herald_member_now(g.joined_at, g.removed_at), false) END, false)
              FROM unnest(\(messageIDs)::text[]) AS q(id)
              LEFT JOIN messages m ON m.app = \(app) AND m.id = q.id AND m.created_seen
              LEFT JOIN threads t ON t.app = \(app) AND t.parent_id = coalesce(m.parent_id, q.id)
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = \(uid) AND s.thread_id = t.parent_id
              LEFT JOIN group_members g ON g.app = \(app) AND g.group_id = t.group_id AND g.uid = \(uid)
            """)
        return try rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Bool.self)) }
    }
}
