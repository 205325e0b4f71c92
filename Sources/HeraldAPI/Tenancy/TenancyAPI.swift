import HeraldDomain
import HeraldStore
import HTTPServer
import JSON
import Postgres

/// The admin API (SPEC §2): apps and their keys.
package enum TenancyAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let database: PostgresPool
        package let tenancy: TenancyStore

        package init(_ all: Dependencies) {
            database = all.database
            tenancy = all.tenancy
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>) {
        router.add(.post, "/v1/apps", Route(access: .admin, accepts: Route.json, handler: createApp))
        router.add(.get, "/v1/apps", Route(access: .admin, handler: listApps))
        router.add(.post, "/v1/apps/{app}/keys", Route(access: .admin, accepts: Route.json, handler: createKey))
        router.add(.get, "/v1/apps/{app}/keys", Route(access: .admin, handler: listKeys))
        router.add(.delete, "/v1/apps/{app}/keys/{keyId}", Route(access: .admin, handler: revokeKey))
    }

    package static let appNotFound = HTTPError(status: 404, code: "ERR_APP_NOT_FOUND", message: "no such app")

    package struct CreateAppBody: Decodable {
        package let id: String
    }

    package static func createApp(_ context: Context) throws -> Response {
        let body = try context.request.decodeJSON(CreateAppBody.self)
        let id = try Identifier.validate(body.id, field: "id")
        let services = context.services
        guard let app = try services.database.withConnection({ try services.tenancy.createApp(id, on: $0) }) else {
            throw HTTPError(status: 409, code: "ERR_ALREADY_EXISTS", message: "an app with this id exists",
                            params: ["field": "id"])
        }
        return .json(app, status: 201)
    }

    package static func listApps(_ context: Context) throws -> Response {
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try list.position(kind: "apps")
        let services = context.services
        let apps = try services.database.withConnection {
            try services.tenancy.listApps(after: after, limit: list.limit + 1, on: $0)
        }
        return .json(list.page(apps.map { (position: $0.id, item: $0) }, kind: "apps"))
    }

    package struct CreateKeyBody: Decodable {
        package let role: String
        package let label: String?
    }

    package static func createKey(_ context: Context) throws -> Response {
        let body = try context.request.decodeJSON(CreateKeyBody.self)
        guard let role = Role(rawValue: body.role) else {
            throw HTTPError.badRequest("role must be ingest, worker or server", field: "role")
        }
        // Counted in Unicode scalars, as JSON Schema's maxLength (and ids) count, not in Characters.
        // (U+0000, here as in every body, is refused by `Request.jsonBody`.)
        if let label = body.label, label.unicodeScalars.count > 200 {
            throw HTTPError.badRequest("label must be at most 200 characters", field: "label")
        }
        let app = context.parameter("app")
        let services = context.services
        guard Identifier.isValid(app), let created = try services.database.withConnection({
            try services.tenancy.createKey(app: app, role: role, label: body.label, on: $0)
        }) else { throw appNotFound }
        return .json(created, status: 201)
    }

    package static func listKeys(_ context: Context) throws -> Response {
        let app = context.parameter("app")
        let services = context.services
        let keys = try services.database.withConnection { connection -> [TenancyStore.KeyInfo]? in
            guard try services.tenancy.appExists(app, on: connection) else { return nil }
            return try services.tenancy.listKeys(app: app, on: connection)
        }
        guard let keys else { throw appNotFound }
        return .json(ListPage(items: keys))
    }

    package static func revokeKey(_ context: Context) throws -> Response {
        let app = context.parameter("app")
        let keyID = context.parameter("keyId")
        let services = context.services
        let outcome = try services.database.withConnection { connection -> HTTPError? in
            guard try services.tenancy.appExists(app, on: connection) else { return appNotFound }
            guard try services.tenancy.revokeKey(app: app, id: keyID, on: connection) else {
                return HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "no such key", params: ["field": "keyId"])
            }
            return nil
        }
        if let outcome { throw outcome }
        return Response.noContent()
    }
}
