import HeraldDomain
import HTTPTypes
import Postgres

/// The thread inbox (SPEC §6): its page, one row, and read marks with their clear jobs (SPEC §13.2).
package enum InboxStore {
    /// The JSON of one inbox row, built by PostgreSQL (`s` subscriptions, `t` threads, `owner` the owner).
    package static func rowJSON(owner: String) -> SQL { """
        jsonb_build_object(
            'parentMessageId', t.parent_id, 'conversationId', t.conversation_id, 'receiverType', t.receiver_type,
            'receiver', CASE WHEN t.group_id IS NOT NULL THEN t.group_id WHEN t.user_a = \(owner) THEN t.user_b ELSE t.user_a END,
            'parent', jsonb_build_object('id', t.parent_id, 'sender', t.author, 'sentAt', t.parent_sent_at, 'text', t.parent_text),
            'replyCount', t.reply_count,
            'lastReply', CASE WHEN t.last_reply_id IS NOT NULL THEN jsonb_build_object(
                'id', t.last_reply_id, 'sender', t.last_reply_sender, 'sentAt', t.last_reply_at, 'text', t.last_reply_text) END,
            'unreadReplyCount', CASE WHEN s.subscribed THEN greatest(0, t.reply_count - s.read_count) ELSE 0 END,
            'unreadMentionCount', coalesce(s.unread_mentions, 0),
            'subscribed', coalesce(s.subscribed, false),
            'level', CASE WHEN s.subscribed AND s.tracked THEN 'track' ELSE 'notify' END,
            'subscription', CASE WHEN s.subscribed THEN jsonb_build_object('source', s.source, 'reason', s.reason, 'since', s.since) END,
            'updatedAt', greatest(s.updated_at, t.updated_at))::text
        """
    }

    /// One page of `owner`'s inbox after the position `after` (activity, thread id), at most
    /// `limit` rows, with the totals: each row `threads`, `mentions`, `activity`, `thread_id`, `row`.
    /// Every table names the app itself (on Citus a correlated `st.app = s.app` inside this UNION
    /// lost rows without an error).
    package static func page(app: String, owner: String, conversation: String?, unreadOnly: Bool, after: (Int64, String)?, limit: Int,
                             on connection: PostgresConnection) throws -> PostgresRows {
        // One statement per shape, so that each is prepared with the plan that fits it.
        // Rows are ordered by their stored sort key, except the rows of threads whose sort key is
        // being refreshed in the background (stale_threads, a handful): those are read with the
        // thread's own activity and merged in. A stored key is never ahead of the thread's, so
        // the merged top rows are exact (docs/inbox.md).
        var shared: [SQL] = ["s.visible"]
        if let conversation { shared.append("s.conversation_id = \(conversation)") }
        if unreadOnly { shared.append("s.has_unread") }
        var storedAfter: SQL = "", staleAfter: SQL = ""
        if let after {
            storedAfter = " AND (s.activity_at, s.thread_id COLLATE \"C\") < (\(after.0), \(after.1)::text COLLATE \"C\")"
            staleAfter = " WHERE (x.activity, x.thread_id COLLATE \"C\") < (\(after.0), \(after.1)::text COLLATE \"C\")"
        }
        let filters = SQL.joined(shared, separator: " AND ")
        return try connection.query("""
            WITH page AS (
                SELECT * FROM (
                    SELECT s.activity_at AS activity, s.thread_id, \(rowJSON(owner: owner)) AS row
                      FROM (SELECT * FROM subscriptions s
                             WHERE s.app = \(app) AND s.uid = \(owner) AND \(filters)\(storedAfter)
                               AND NOT EXISTS (SELECT 1 FROM stale_threads st WHERE st.app = \(app) AND st.thread_id = s.thread_id)
                             ORDER BY s.activity_at DESC, s.thread_id COLLATE "C" DESC
                             LIMIT \(limit)) s
                      JOIN threads t ON t.app = \(app) AND t.parent_id = s.thread_id
                    UNION ALL
                    SELECT x.activity, x.thread_id, x.row FROM (
                        SELECT coalesce(t.last_reply_at, t.parent_sent_at, s.since, 0) AS activity, s.thread_id, \(rowJSON(owner: owner)) AS row
                          FROM stale_threads st
                          JOIN subscriptions s ON s.app = \(app) AND s.uid = \(owner) AND s.thread_id = st.thread_id
                          JOIN threads t ON t.app = \(app) AND t.parent_id = s.thread_id
                         WHERE st.app = \(app) AND \(filters)) x\(staleAfter)
                ) merged
                ORDER BY activity DESC, thread_id COLLATE "C" DESC
                LIMIT \(limit)
            ),
            totals AS (
                SELECT count(*) AS threads, coalesce(sum(unread_mentions), 0) AS mentions FROM subscriptions
                 WHERE app = \(app) AND uid = \(owner) AND visible AND has_unread
            )
            SELECT totals.threads, totals.mentions, page.activity, page.thread_id, page.row
              FROM totals LEFT JOIN page ON true
             ORDER BY page.activity DESC, page.thread_id COLLATE "C" DESC
            """)
    }

    /// Where a read of `thread` puts the mark: the reply `replyID` (404 when it is not a reply of
    /// the thread), or the thread's last reply; nil when the thread has no reply.
    package static func readTarget(app: String, thread: String, replyID: String?, on connection: PostgresConnection) throws -> (at: Int64, id: String)? {
        if let replyID {
            let rows = try connection.query("""
                SELECT sent_at, id FROM messages WHERE app = \(app) AND id = \(replyID) AND parent_id = \(thread) AND created_seen
                """)
            guard let row = rows.first else {
                throw HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND", message: "no such reply in this thread",
                                params: ["field": "messageId"])
            }
            return (try row.decode(0), try row.decode(1))
        }
        let rows = try connection.query(
            "SELECT last_reply_at, last_reply_id FROM threads WHERE app = \(app) AND parent_id = \(thread) AND last_reply_id IS NOT NULL")
        guard let row = rows.first else { return nil }
        return (try row.decode(0), try row.decode(1))
    }

    /// Moves `owner`'s mark in `thread` forward to `at` (never back), refreshes the inbox row and
    /// makes the clear job of the move (SPEC §13.2, `deviceID` left out); returns the jobs made.
    package static func markRead(app: String, owner: String, thread: String, at target: (at: Int64, id: String), deviceID device: String?,
                                 on connection: PostgresConnection) throws -> Int {
        // The mark before the move, for the clear job (SPEC §13.2).
        let moved = try connection.query("""
            WITH before AS (SELECT mark_at, mark_id FROM subscriptions WHERE app = \(app) AND uid = \(owner) AND thread_id = \(thread))
            UPDATE subscriptions s SET mark_at = \(target.at), mark_id = \(target.id), updated_at = herald_now_ms()
              FROM before b
             WHERE s.app = \(app) AND s.uid = \(owner) AND s.thread_id = \(thread)
               AND (s.mark_at IS NULL OR (s.mark_at, s.mark_id) < (\(target.at), \(target.id)::text COLLATE "C"))
            RETURNING b.mark_at, b.mark_id
            """)
        try connection.query("SELECT herald_refresh_inbox(\(app), ARRAY[\(owner)::text], ARRAY[\(thread)::text])")
        guard let before = moved.first else { return 0 }
        return try ClearJobs.make(app: app, uid: owner, deviceID: device, moves: [
            .init(thread: thread, fromAt: try before.decode(0), fromID: try before.decode(1), toAt: target.at, toID: target.id),
        ], on: connection)
    }

    /// One inbox row of `owner`, as the page lists it (built by PostgreSQL, as there).
    package static func row(app: String, owner: String, thread: String, on connection: PostgresConnection) throws -> String {
        try connection.query("""
            SELECT \(rowJSON(owner: owner)) FROM threads t
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = \(owner) AND s.thread_id = t.parent_id
             WHERE t.app = \(app) AND t.parent_id = \(thread)
            """)[0].decode(0, as: String.self)
    }

    /// The threads with unread replies of `owner`'s inbox (or of one conversation), with their groups.
    package static func unreadThreads(app: String, owner: String, conversation: String?,
                                      on connection: PostgresConnection) throws -> [(thread: String, group: String?)] {
        try connection.query("""
            SELECT t.parent_id, t.group_id
              FROM subscriptions s JOIN threads t ON t.app = \(app) AND t.parent_id = s.thread_id
             WHERE s.app = \(app) AND s.uid = \(owner) AND s.visible AND s.has_unread
               AND (\(conversation)::text IS NULL OR s.conversation_id = \(conversation))
            """).map { (thread: try $0.decode(0, as: String.self), group: try $0.decode(1, as: String?.self)) }
    }

    /// Marks `threads` of `owner`'s inbox read up to their last replies (under the caller's locks),
    /// refreshes their inbox rows and makes the clear jobs; returns the marks moved and the jobs made.
    package static func markAllRead(app: String, owner: String, threads: [String], conversation: String?, deviceID device: String?,
                                    on connection: PostgresConnection) throws -> (moved: Int, cleared: Int) {
        // Each moved mark with the one before it, for the clear jobs (SPEC §13.2).
        let rows = try connection.query("""
            WITH before AS (
                SELECT thread_id, mark_at, mark_id FROM subscriptions
                 WHERE app = \(app) AND uid = \(owner) AND thread_id = ANY (\(threads)::text[])
            ), marked AS (
                UPDATE subscriptions s SET mark_at = t.last_reply_at, mark_id = t.last_reply_id,
                                           updated_at = herald_now_ms()
                  FROM threads t, before b
                 WHERE s.app = \(app) AND s.uid = \(owner) AND s.visible AND s.has_unread AND b.thread_id = s.thread_id
                   AND (\(conversation)::text IS NULL OR s.conversation_id = \(conversation))
                   AND t.app = \(app) AND t.parent_id = s.thread_id AND t.last_reply_id IS NOT NULL
                   AND (s.mark_at IS NULL OR (s.mark_at, s.mark_id) < (t.last_reply_at, t.last_reply_id COLLATE "C"))
                   AND t.parent_id = ANY (\(threads)::text[])
                RETURNING s.thread_id, b.mark_at AS from_at, b.mark_id AS from_id, s.mark_at AS to_at, s.mark_id AS to_id
            )
            SELECT thread_id, from_at, from_id, to_at, to_id FROM marked
            """)
        let moves = try rows.map {
            ClearJobs.Move(thread: try $0.decode("thread_id"), fromAt: try $0.decode("from_at"), fromID: try $0.decode("from_id"),
                           toAt: try $0.decode("to_at"), toID: try $0.decode("to_id"))
        }
        guard !moves.isEmpty else { return (0, 0) }
        try connection.query("SELECT herald_refresh_inbox(\(app), \(Array(repeating: owner, count: moves.count)), \(moves.map(\.thread)))")
        return (moves.count, try ClearJobs.make(app: app, uid: owner, deviceID: device, moves: moves, on: connection))
    }
}
