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

        let rows = try context.services.database.withConnection {
            try InboxStore.page(app: context.app, owner: owner, conversation: conversation, unreadOnly: unreadOnly, after: after,
                                limit: list.limit + 1, on: $0)
        }
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
                let target = try InboxStore.readTarget(app: app, thread: thread, replyID: replyID, on: connection)
                let cleared = try target.map {
                    try InboxStore.markRead(app: app, owner: owner, thread: thread, at: $0, deviceID: device, on: connection)
                } ?? 0
                return (try InboxStore.row(app: app, owner: owner, thread: thread, on: connection), cleared)
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
            let keys = try InboxStore.unreadThreads(app: app, owner: owner, conversation: conversation, on: connection)
            var index = 0
            while index < keys.count {
                let slice = Array(keys[index..<min(keys.count, index + 200)])
                index += slice.count
                updated += try connection.withTransaction { connection in
                    var locks = LockSet()
                    for key in slice { locks.thread(key.thread, group: key.group) }
                    try locks.lock(app: app, on: connection)
                    let (moved, clearedHere) = try InboxStore.markAllRead(app: app, owner: owner, threads: slice.map(\.thread),
                                                                          conversation: conversation, deviceID: device, on: connection)
                    cleared += clearedHere
                    return moved
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
