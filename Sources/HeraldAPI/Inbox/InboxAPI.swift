import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §6: the thread inbox and read marks (server role).
package enum InboxAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let database: PostgresPool
        /// Signs the page cursors.
        package let cursorKey: [UInt8]
        /// A read's clear jobs wake whoever waits for jobs.
        package let jobsProduced: JobsProduced

        package init(_ all: Dependencies) {
            (database, cursorKey, jobsProduced) = (all.database, all.cursorKey, JobsProduced(all))
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/users/{uid}/threads", Route(access: .server, handler: list))
        router.add(.post, "/v1/users/{uid}/threads/{messageId}/read", Route(access: .server, accepts: Route.json, handler: readOne))
        router.add(.post, "/v1/users/{uid}/threads/read", Route(access: .server, accepts: Route.json, handler: readAll))
    }

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

    /// The filter of a request: one conversation, or none.
    package static func conversationFilter(_ request: Request, owner: String) throws(HTTPError) -> String? {
        let guid = request.query["guid"]
        let peer = request.query["uid"]
        if guid != nil && peer != nil {
            throw HTTPError(status: 400, code: "ERR_INVALID_FILTER", message: "give guid or uid, not both", params: ["field": "uid"])
        }
        if let guid { return Conversation.group(try Identifier.validate(guid, field: "guid")).id }
        if let peer { return Conversation.oneOnOne(owner, try Identifier.validate(peer, field: "uid")).id }
        return nil
    }

    package static func list(_ context: Context) throws -> Response {
        let owner = try Identifier.validate(context.parameter("uid"), field: "uid")
        let request = context.request
        let list = try ListParameters(request, defaultLimit: 30)
        let conversation = try conversationFilter(request, owner: owner)
        let unreadOnly: Bool
        switch request.query["unreadOnly"] {
        case nil, "false": unreadOnly = false
        case "true": unreadOnly = true
        default: throw HTTPError.badRequest("unreadOnly must be true or false", field: "unreadOnly")
        }
        // The cursor names its list: another user's, another filter's, or an altered one is refused.
        let scope = [context.app, owner, conversation ?? "", unreadOnly ? "1" : "0"]
        let key = context.services.cursorKey
        var after: (Int64, String)?
        if let cursor = list.cursor {
            let fields = try Cursor.decode(kind: "inbox", fieldCount: 6, cursor, key: key)
            guard Array(fields.prefix(4)) == scope, let activity = Int64(fields[4]) else {
                throw HTTPError.badRequest("cursor is not valid for this list", field: "cursor")
            }
            after = (activity, fields[5])
        }

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
        let (app, limit) = (context.app, list.limit + 1)
        let sql: SQL = """
            WITH page AS (
                SELECT * FROM (
                    SELECT s.activity_at AS activity, s.thread_id, \(rowJSON(owner: owner)) AS row
                      FROM (SELECT * FROM subscriptions s
                             WHERE s.app = \(app) AND s.uid = \(owner) AND \(filters)\(storedAfter)
                               AND NOT EXISTS (SELECT 1 FROM stale_threads st WHERE st.app = s.app AND st.thread_id = s.thread_id)
                             ORDER BY s.activity_at DESC, s.thread_id COLLATE "C" DESC
                             LIMIT \(limit)) s
                      JOIN threads t ON t.app = s.app AND t.parent_id = s.thread_id
                    UNION ALL
                    SELECT x.activity, x.thread_id, x.row FROM (
                        SELECT coalesce(t.last_reply_at, t.parent_sent_at, s.since, 0) AS activity, s.thread_id, \(rowJSON(owner: owner)) AS row
                          FROM stale_threads st
                          JOIN subscriptions s ON s.app = st.app AND s.uid = \(owner) AND s.thread_id = st.thread_id
                          JOIN threads t ON t.app = s.app AND t.parent_id = s.thread_id
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
            """
        let rows = try context.services.database.withConnection { try $0.query(sql) }
        let totals = (threads: try rows.first?.decode("threads", as: Int.self) ?? 0, mentions: try rows.first?.decode("mentions", as: Int.self) ?? 0)
        let items = try rows.filter { try $0.decode("row", as: String?.self) != nil }.map {
            (activity: try $0.decode("activity", as: Int64.self), thread: try $0.decode("thread_id", as: String.self), json: try $0.decode("row", as: String.self))
        }
        let shown = items.prefix(list.limit)
        let next = items.count > list.limit
            ? shown.last.map { Cursor.encode(kind: "inbox", scope + [String($0.activity), $0.thread], key: key) } : nil
        return .json(InboxPage(page: ListPage(items: shown.map { RawJSON($0.json) }, next: next),
                               unreadMentions: totals.mentions, unreadThreads: totals.threads))
    }

    /// A read's optional `deviceId` (SPEC §13.2): the device that read, left out of the clear job.
    package static func deviceID(_ body: [String: JSONValue]) throws(HTTPError) -> String? {
        guard let value = body["deviceId"], value != .null else { return nil }
        guard case .string(let id) = value, Identifier.isValid(id) else {
            throw HTTPError.badRequest("deviceId must be a device id", field: "deviceId")
        }
        return id
    }

    /// Marks one thread read up to a reply (default: the latest); the position only moves forward.
    package static func readOne(_ context: Context) throws -> Response {
        let owner = try Identifier.validate(context.parameter("uid"), field: "uid")
        let messageID = try Identifier.validate(context.parameter("messageId"), field: "messageId")
        let body = try context.request.jsonObject()
        let device = try deviceID(body)
        var replyID: String?
        if let value = body["messageId"], value != .null {
            guard let id = value.stringValue, Identifier.isValid(id) else {
                throw HTTPError.badRequest("messageId must be a message id", field: "messageId")
            }
            replyID = id
        }
        let app = context.app
        let store = SubscriptionStore()
        let (row, cleared) = try context.services.database.withConnection { connection in
            try store.inThread(app: app, messageID: messageID, on: connection) { thread, connection -> (String, Int) in
                guard try store.hasAccess(app: app, uid: owner, thread: thread, on: connection) else {
                    throw SubscriptionStore.noAccess
                }
                var target: (at: Int64, id: String)?
                if let replyID {
                    let rows = try connection.query("""
                        SELECT sent_at, id FROM messages WHERE app = \(app) AND id = \(replyID) AND parent_id = \(thread) AND created_seen
                        """)
                    guard let row = rows.first else {
                        throw HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND", message: "no such reply in this thread",
                                        params: ["field": "messageId"])
                    }
                    target = (try row.decode(0), try row.decode(1))
                } else {
                    let rows = try connection.query(
                        "SELECT last_reply_at, last_reply_id FROM threads WHERE app = \(app) AND parent_id = \(thread) AND last_reply_id IS NOT NULL")
                    if let row = rows.first { target = (try row.decode(0), try row.decode(1)) }
                }
                var cleared = 0
                if let target {
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
                    if let before = moved.first {
                        cleared = try ClearJobs.make(app: app, uid: owner, deviceID: device, moves: [
                            .init(thread: thread, fromAt: try before.decode(0), fromID: try before.decode(1), toAt: target.at, toID: target.id),
                        ], on: connection)
                    }
                }
                let rows = try connection.query("""
                    SELECT \(rowJSON(owner: owner)) FROM threads t
                      LEFT JOIN subscriptions s ON s.app = t.app AND s.uid = \(owner) AND s.thread_id = t.parent_id
                     WHERE t.app = \(app) AND t.parent_id = \(thread)
                    """)
                return (try rows[0].decode(0, as: String.self), cleared)
            }
        }
        context.services.jobsProduced(cleared, app: context.app)
        // One inbox row, as the page lists it (built by PostgreSQL, as there).
        return .jsonText(row)
    }

    /// Marks every thread of the inbox (or of one conversation) read.
    package static func readAll(_ context: Context) throws -> Response {
        let owner = try Identifier.validate(context.parameter("uid"), field: "uid")
        let conversation = try conversationFilter(context.request, owner: owner)
        let device = try deviceID(try context.request.jsonObject())
        let app = context.app
        var updated = 0, cleared = 0
        try context.services.database.withConnection { connection in
            // The conversations with unread threads, locked a slice at a time so that concurrent
            // ingest cannot slip a reply between the mark and the count.
            let keys = try connection.query("""
                SELECT t.parent_id, t.group_id
                  FROM subscriptions s JOIN threads t ON t.app = s.app AND t.parent_id = s.thread_id
                 WHERE s.app = \(app) AND s.uid = \(owner) AND s.visible AND s.has_unread
                   AND (\(conversation)::text IS NULL OR s.conversation_id = \(conversation))
                """).map { (thread: try $0.decode(0, as: String.self), group: try $0.decode(1, as: String?.self)) }
            var index = 0
            while index < keys.count {
                let slice = Array(keys[index..<min(keys.count, index + 200)])
                index += slice.count
                updated += try connection.withTransaction { connection in
                    var locks = LockSet()
                    for key in slice { locks.thread(key.thread, group: key.group) }
                    try locks.lock(app: app, on: connection)
                    // Each moved mark with the one before it, for the clear jobs (SPEC §13.2).
                    let rows = try connection.query("""
                        WITH before AS (
                            SELECT thread_id, mark_at, mark_id FROM subscriptions
                             WHERE app = \(app) AND uid = \(owner) AND thread_id = ANY (\(slice.map(\.thread))::text[])
                        ), marked AS (
                            UPDATE subscriptions s SET mark_at = t.last_reply_at, mark_id = t.last_reply_id,
                                                       updated_at = herald_now_ms()
                              FROM threads t, before b
                             WHERE s.app = \(app) AND s.uid = \(owner) AND s.visible AND s.has_unread AND b.thread_id = s.thread_id
                               AND (\(conversation)::text IS NULL OR s.conversation_id = \(conversation))
                               AND t.app = s.app AND t.parent_id = s.thread_id AND t.last_reply_id IS NOT NULL
                               AND (s.mark_at IS NULL OR (s.mark_at, s.mark_id) < (t.last_reply_at, t.last_reply_id COLLATE "C"))
                               AND t.parent_id = ANY (\(slice.map(\.thread))::text[])
                            RETURNING s.thread_id, b.mark_at AS from_at, b.mark_id AS from_id, s.mark_at AS to_at, s.mark_id AS to_id
                        )
                        SELECT thread_id, from_at, from_id, to_at, to_id FROM marked
                        """)
                    let moves = try rows.map {
                        ClearJobs.Move(thread: try $0.decode("thread_id"), fromAt: try $0.decode("from_at"), fromID: try $0.decode("from_id"),
                                       toAt: try $0.decode("to_at"), toID: try $0.decode("to_id"))
                    }
                    if !moves.isEmpty {
                        try connection.query("SELECT herald_refresh_inbox(\(app), \(Array(repeating: owner, count: moves.count)), \(moves.map(\.thread)))")
                        cleared += try ClearJobs.make(app: app, uid: owner, deviceID: device, moves: moves, on: connection)
                    }
                    return moves.count
                }
            }
        }
        context.services.jobsProduced(cleared, app: context.app)
        return .json(ReadResult(updated: updated))
    }
}

/// `POST …/read`: how many threads' read positions moved.
package struct ReadResult: JSONWritable {
    package let updated: Int
    package func write(to writer: inout JSONWriter) { writer.object { $0.field("updated", updated) } }
}

/// `GET /v1/users/{uid}/threads` (SPEC §6): SPEC §3's envelope plus the user's totals. The rows
/// are built by PostgreSQL (`jsonb_build_object` in the page's query) and written as they are:
/// building them in Swift from decoded columns made the inbox page measurably slower in
/// `make bench` W4, so this is the one place where a response's items are not Swift values.
package struct InboxPage: JSONWritable {
    package let page: ListPage<RawJSON>
    package let unreadMentions: Int
    package let unreadThreads: Int

    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            page.writeFields(to: &body)
            body.field("totals") { $0.object { totals in
                totals.field("unreadMentions", unreadMentions)
                totals.field("unreadThreads", unreadThreads)
            } }
        }
    }
}
