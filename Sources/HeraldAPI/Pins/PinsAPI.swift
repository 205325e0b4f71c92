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
            try PinLists.pins(app: context.app, conversation: conversation, after: after, limit: list.limit + 1, on: connection)
        }
        return try list.page(rows, kind: "pins")
    }

    package static func saved(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try position(list, kind: "saved")
        let rows = try context.services.database.withConnection { connection in
            try PinLists.saved(app: context.app, uid: uid, after: after, limit: list.limit + 1, on: connection)
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
            try PinLists.pinnedConversations(app: context.app, uid: uid, after: after, limit: list.limit + 1, on: connection)
        }
        return try list.page(rows, kind: "pinned-conversations")
    }

    /// Per viewer, for a message list: pin, save and thread subscription of each id the user can
    /// see; unknown, deleted and inaccessible ids are left out.
    package static func lookup(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let ids = try SubscriptionsAPI.messageIDs(context)
        let rows = try context.services.database.withConnection { connection in
            try PinLists.lookup(app: context.app, uid: uid, ids: ids, on: connection)
        }
        return .json(RawJSON("{\"data\":" + ((try rows.first?.decode(0, as: String?.self)) ?? nil ?? "{}") + "}"))
    }
}
