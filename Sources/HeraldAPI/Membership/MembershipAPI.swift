import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// The membership snapshot (SPEC §4): `PUT/GET /v1/groups/{guid}/members` (server role).
package enum MembershipAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static let maxMembers = 100_000

    package static func register(in router: inout Router<Route>) {
        router.add(.put, "/v1/groups/{guid}/members", Route(access: .server, accepts: Route.json, handler: replace))
        router.add(.get, "/v1/groups/{guid}/members", Route(access: .server, handler: list))
    }

    /// Members changed by one snapshot from which group_members is analyzed after it.
    package static let analyzeAfter = 1000

    package struct Snapshot: Decodable {
        package let members: [JSONValue]
    }

    /// Replaces the member set, as evidence at the database's clock: users listed and not members
    /// join now; members not listed are removed now. Their subscriptions follow (SPEC §5.3).
    package static func replace(_ context: Context) throws -> Response {
        let guid = try Identifier.validate(context.parameter("guid"), field: "guid")
        let body = try context.request.decodeJSON(Snapshot.self)
        guard body.members.count <= maxMembers else {
            throw HTTPError.badRequest("members holds at most \(maxMembers) uids", field: "members", params: ["max": .int(maxMembers)])
        }
        var members: [String] = []
        var seen: Set<String> = []
        for (index, value) in body.members.enumerated() {
            guard let uid = value.stringValue, Identifier.isValid(uid) else {
                throw HTTPError.badRequest("members[\(index)] must be a uid", field: "members[\(index)]")
            }
            if seen.insert(uid).inserted { members.append(uid) }
        }
        _ = try context.services.database.withConnection {
            try MembershipStore.replace(app: context.app, group: guid, members: members, analyzeAfter: analyzeAfter, on: $0)
        }
        return .json(MemberCount(count: members.count))
    }

    package static func list(_ context: Context) throws -> Response {
        let guid = try Identifier.validate(context.parameter("guid"), field: "guid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try list.position(kind: "members")
        let rows = try context.services.database.withConnection {
            try MembershipStore.members(app: context.app, group: guid, after: after, limit: list.limit + 1, on: $0)
        }
        return try list.page(rows, kind: "members")
    }
}

/// `PUT /v1/groups/{guid}/members`: how many members the snapshot holds.
package struct MemberCount: JSONWritable {
    package let count: Int
    package func write(to writer: inout JSONWriter) { writer.object { $0.field("count", count) } }
}
