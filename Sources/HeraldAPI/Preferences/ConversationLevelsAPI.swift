import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §18: a user's level for one conversation (`all`, `mentions`, `nothing`), which replaces
/// their `messages`, `replies` and `quotedReplies` preferences there in routing
/// (`Routing.decide`). Server role, mirrored under `/v1/me/…` (`UserRoutes`); every change is a
/// `conversationLevel` feed item (the table's trigger, sql/0027).
package enum ConversationLevelsAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static func register(in router: inout Router<Route>) {
        let path = "/v1/users/{uid}/conversations/{conversationId}/level"
        router.add(.put, path, Route(access: .server, accepts: Route.json, handler: put))
        router.add(.delete, path, Route(access: .server, handler: delete))
        router.add(.get, "/v1/users/{uid}/conversation-levels", Route(access: .server, handler: list))
    }

    package static let notFound = HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "no level is set for this conversation",
                                    params: ["field": "conversationId"])


    /// The user and the conversation of the path; 403 unless the user is in the conversation now
    /// (a current member of its group, or one of its two users).
    package static func target(_ context: Context, on connection: PostgresConnection) throws -> (uid: String, conversation: String) {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let conversation = try Identifier.validateConversation(context.parameter("conversationId"), field: "conversationId")
        guard conversation.hasPrefix("group_") || conversation.contains("_user_") else {
            throw HTTPError.badRequest("conversationId must be group_<guid> or <uidA>_user_<uidB> (SPEC §1)", field: "conversationId")
        }
        guard try isMember(app: context.app, uid: uid, conversation: conversation, on: connection) else {
            throw SubscriptionStore.noAccess
        }
        return (uid, conversation)
    }

    /// Whether `uid` is in conversation `id` (SPEC §1's form: `group_<guid>`, or `<a>_user_<b>`
    /// with the two uids sorted) now.
    package static func isMember(app: String, uid: String, conversation id: String, on connection: PostgresConnection) throws -> Bool {
        if id.hasPrefix("group_") {
            // the one "can see this conversation now" rule of pins (a current member of the group)
            return try ConversationLevelStore.isGroupMember(app: app, uid: uid, group: String(id.dropFirst("group_".count)), on: connection)
        }
        // one of the two users: the id is the pair's, whichever side the user sorts to
        if id.hasPrefix(uid + "_user_"), Conversation.oneOnOne(uid, String(id.dropFirst(uid.count + 6))).id == id { return true }
        if id.hasSuffix("_user_" + uid), Conversation.oneOnOne(uid, String(id.dropLast(uid.count + 6))).id == id { return true }
        return false
    }

    package static func put(_ context: Context) throws -> Response {
        let object = try context.request.jsonObject(fields: ["level"])
        guard let text = object["level"]?.stringValue, let level = Routing.ConversationLevel(rawValue: text) else {
            throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "level must be \"all\", \"mentions\" or \"nothing\"",
                            params: ["field": "level"])
        }
        let rows = try context.services.database.withConnection { connection in
            let (uid, conversation) = try target(context, on: connection)
            // the same level again is no change: its time and the feed stay as they were
            return try ConversationLevelStore.set(app: context.app, uid: uid, conversation: conversation, level: level, on: connection)
        }
        return .json(RawJSON(rows))
    }

    package static func delete(_ context: Context) throws -> Response {
        let deleted = try context.services.database.withConnection { connection in
            let (uid, conversation) = try target(context, on: connection)
            return try ConversationLevelStore.remove(app: context.app, uid: uid, conversation: conversation, on: connection) ? 1 : 0
        }
        guard deleted > 0 else { throw notFound }
        return .noContent()
    }

    /// Newest change first (`updatedAt`, then the conversation id, both descending).
    package static func list(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try PinsAPI.position(list, kind: "conversation-levels")
        let rows = try context.services.database.withConnection { connection in
            try ConversationLevelStore.list(app: context.app, uid: uid, after: after, limit: list.limit + 1, on: connection)
        }
        return try list.page(rows, kind: "conversation-levels")
    }
}
