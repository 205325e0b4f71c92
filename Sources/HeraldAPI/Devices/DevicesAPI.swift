import HeraldDomain
import HeraldStore
import HTTPServer
import JSON

/// SPEC §13.1: a user's devices (server role; mirrored on `/v1/me/devices`).
package enum DevicesAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>


    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/users/{uid}/devices", Route(access: .server, handler: list))
        router.add(.put, "/v1/users/{uid}/devices/{deviceId}", Route(access: .server, accepts: Route.json, handler: put))
        router.add(.delete, "/v1/users/{uid}/devices/{deviceId}", Route(access: .server, handler: delete))
    }

    package static let notFound = HTTPError(status: 404, code: "ERR_DEVICE_NOT_FOUND", message: "the user has no device with this id",
                                    params: ["field": "deviceId"])

    package static func list(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let devices = try context.services.database.withConnection { try DeviceStore().list(app: context.app, uid: uid, on: $0) }
        return .json(ListPage(items: devices))
    }

    package static func put(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let id = try Identifier.validate(context.parameter("deviceId"), field: "deviceId")
        let body = try context.request.jsonObject(fields: ["platform", "token", "topic", "sandbox"])
        guard case .string(let name)? = body["platform"], let platform = Platform(rawValue: name) else {
            throw HTTPError.badRequest("platform must be \(Platform.names)", field: "platform")
        }
        guard case .string(let token)? = body["token"], (1...4096).contains(token.unicodeScalars.count) else {
            throw HTTPError.badRequest("token must be 1-4096 characters", field: "token", params: ["min": 1, "max": 4096])
        }
        // SPEC §13.4: a browser's token is its PushSubscription, which Herald encrypts for
        if platform == .webpush, WebPushEncryption.subscription(token: token) == nil {
            throw HTTPError.badRequest("a webpush token is the browser's PushSubscription as JSON text: "
                                       + #"{"endpoint": "https://…", "keys": {"p256dh": "<P-256 point>", "auth": "<16 bytes>"}} (base64url)"#,
                                       field: "token")
        }
        var topic: String?
        switch body["topic"] {
        case nil, .null?: topic = nil
        case .string(let text)? where (1...255).contains(text.unicodeScalars.count): topic = text
        default: throw HTTPError.badRequest("topic must be 1-255 characters", field: "topic")
        }
        var sandbox = false
        switch body["sandbox"] {
        case nil, .null?: sandbox = false
        case .bool(let flag)?: sandbox = flag
        default: throw HTTPError.badRequest("sandbox must be true or false", field: "sandbox")
        }
        // Thrown inside the transaction, so that a refused registration moves no token either.
        let device = try context.services.database.withTransaction { connection -> Device in
            let registration = try DeviceStore().register(app: context.app, uid: uid, id: id, platform: platform, token: token,
                                                          topic: topic, sandbox: sandbox, on: connection)
            guard case .saved(let device) = registration else {
                throw HTTPError(status: 409, code: "ERR_DEVICE_LIMIT_EXCEEDED",
                                message: "a user has at most \(DeviceStore.maxPerUser) devices; remove one first",
                                params: ["limit": .int(DeviceStore.maxPerUser)])
            }
            return device
        }
        return .json(device)
    }

    package static func delete(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let id = try Identifier.validate(context.parameter("deviceId"), field: "deviceId")
        guard try context.services.database.withConnection({ try DeviceStore().remove(app: context.app, uid: uid, id: id, on: $0) }) else {
            throw notFound
        }
        return .noContent()
    }
}
