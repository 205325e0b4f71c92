import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §5.2: explicit subscribe, unsubscribe, state and bulk lookup (server role).
package enum SubscriptionsAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static func register(in router: inout Router<Route>) {
        let path = "/v1/users/{uid}/threads/{messageId}/subscription"
        router.add(.put, path, Route(access: .server, accepts: Route.json) { try change(.subscribe(tracked: try level($0)), $0) })
        router.add(.delete, path, Route(access: .server, accepts: Route.json) { try change(.unsubscribe, $0) })
        router.add(.get, path, Route(access: .server) { (context: Context) in
            let (uid, messageID) = try identifiers(context)
            let services = context.services
            let state = try services.database.withConnection {
                try SubscriptionStore().get(app: context.app, uid: uid, messageID: messageID, on: $0)
            }
            return .json(state)
        })
        router.add(.post, "/v1/users/{uid}/subscriptions/lookup", Route(access: .server, accepts: Route.json, handler: lookup))
    }

    package static func identifiers(_ context: Context) throws(HTTPError) -> (String, String) {
        (try Identifier.validate(context.parameter("uid"), field: "uid"),
         try Identifier.validate(context.parameter("messageId"), field: "messageId"))
    }

    /// A PUT's optional `{"level": "notify" | "track"}` (SPEC §18): true for track, false for
    /// notify, nil without a body or a level (the row keeps its level).
    package static func level(_ context: Context) throws -> Bool? {
        guard let value = try context.request.jsonObject()["level"] else { return nil }
        if case .null = value { return nil }
        switch value.stringValue {
        case "notify": return false
        case "track": return true
        default:
            throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "level must be \"notify\" or \"track\"",
                            params: ["field": "level"])
        }
    }

    package static func change(_ change: SubscriptionStore.Change, _ context: Context) throws -> Response {
        let (uid, messageID) = try identifiers(context)
        let state = try context.services.database.withConnection {
            try SubscriptionStore().change(change, app: context.app, uid: uid, messageID: messageID, on: $0)
        }
        return .json(state)
    }

    package struct LookupBody: Decodable {
        package let messageIds: [JSONValue]
    }

    /// The `messageIds` of a lookup's body: at most 1,000 (else `400 ERR_INVALID_LIMIT`), each a
    /// message id (else 400 naming it).
    package static func messageIDs(_ context: Context) throws -> [String] {
        let body = try context.request.decodeJSON(LookupBody.self)
        guard body.messageIds.count <= 1000 else { throw HTTPError.invalidLimit(field: "messageIds", min: 0, max: 1000) }
        var ids: [String] = []
        for (index, value) in body.messageIds.enumerated() {
            guard let id = value.stringValue, Identifier.isValid(id) else {
                throw HTTPError.badRequest("messageIds[\(index)] must be a message id", field: "messageIds[\(index)]")
            }
            ids.append(id)
        }
        return ids
    }

    package static func lookup(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let ids = try messageIDs(context)
        let states = try context.services.database.withConnection {
            try SubscriptionStore().lookup(app: context.app, uid: uid, messageIDs: ids, on: $0)
        }
        return .json(LookupResult(states: Dictionary(states, uniquingKeysWith: { $1 })))
    }
}

/// `POST …/subscriptions/lookup`: whether the user is subscribed to each message's thread, by id
/// (sorted, so equal answers are equal text).
package struct LookupResult: JSONWritable {
    package let states: [String: Bool]
    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("data") { $0.object { data in for id in states.keys.sorted() { data.field(id, states[id]!) } } }
        }
    }
}
