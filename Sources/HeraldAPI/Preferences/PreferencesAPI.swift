import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §7.2–7.3: app settings, user preferences and mutes (server role).
package enum PreferencesAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let configuration: Configuration
        package let database: PostgresPool
        package let delivery: any DeliveryControl

        package init(_ all: Dependencies) {
            configuration = all.configuration
            database = all.database
            delivery = all.delivery
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/settings/notifications", Route(access: .server) { (context: Context) in
            let settings = try context.services.database.withConnection { try PreferenceStore().settings(app: context.app, on: $0) }
            return .json(settings.json)
        })
        router.add(.patch, "/v1/settings/notifications", Route(access: .server, accepts: Route.json) { (context: Context) in
            let patch = try context.request.jsonBody()
            try DeliverySettings.checkAddress(inPatch: patch, allowPrivate: context.services.configuration.deliveryAllowPrivate)
            let (settings, secret) = try context.services.database.withTransaction { connection -> (AppSettings, WebhookSecret?) in
                try PreferenceStore.lockSettings(app: context.app, on: connection)
                var settings = try PreferenceStore().settings(app: context.app, on: connection)
                try settings.apply(patch: patch)
                // The first push mode makes the signing secret, shown once, in this answer (SPEC §13.3).
                var secret: WebhookSecret?
                if settings.delivery.mode != .pull, !settings.delivery.secretSet {
                    secret = try DeliverySecretStore().rotate(app: context.app, on: connection)
                    settings.delivery.secretSet = true   // this answer's view; it is read from the secrets
                }
                try DeliveryCredentials.store(settings.delivery.credentialChanges, app: context.app, on: connection)
                try PreferenceStore().saveSettings(settings, app: context.app, on: connection)
                return (settings, secret)
            }
            context.services.delivery.refresh()
            guard let secret, case .object(var root) = settings.json, case .object(var delivery)? = root["delivery"] else {
                return .json(settings.json)
            }
            delivery["secret"] = .string(secret.text)
            root["delivery"] = .object(delivery)
            return .json(JSONValue.object(root))
        })
        router.add(.delete, "/v1/settings/notifications", Route(access: .server) { (context: Context) in
            try context.services.database.withTransaction { connection in
                try PreferenceStore.lockSettings(app: context.app, on: connection)
                try PreferenceStore().saveSettings(nil, app: context.app, on: connection)
                try DeliverySecretStore().removeAll(app: context.app, on: connection)
                try DeliveryCredentials.store([CredentialChange(kind: .apns, pem: nil), CredentialChange(kind: .fcm, pem: nil)],
                                              app: context.app, on: connection)
            }
            context.services.delivery.refresh()
            return .json(AppSettings.defaults.json)
        })
        router.add(.post, "/v1/settings/delivery/rotate-secret", Route(access: .server) { (context: Context) in
            let secret = try context.services.database.withTransaction { connection -> WebhookSecret in
                try PreferenceStore.lockSettings(app: context.app, on: connection)
                return try DeliverySecretStore().rotate(app: context.app, on: connection)
            }
            // (no refresh: deliverers read the live secrets with every claim)
            return .json(JSONValue.object(["secret": .string(secret.text)]))
        })

        router.add(.get, "/v1/users/{uid}/preferences", Route(access: .server) { (context: Context) in
            let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
            let include = context.request.query["include"]
            guard include == nil || include == "sources" else {
                throw HTTPError.badRequest("include must be sources", field: "include")
            }
            let view = try context.services.database.withConnection { connection -> JSONValue in
                let store = PreferenceStore()
                let preferences = try store.preferences(app: context.app, uid: uid, on: connection)
                let settings = try store.settings(app: context.app, on: connection)
                guard include != nil, case .object(var view) = preferences.effectiveJSON(app: settings) else {
                    return preferences.effectiveJSON(app: settings)
                }
                view["sources"] = preferences.sourcesJSON(app: settings)
                return .object(view)
            }
            return .json(view)
        })
        router.add(.patch, "/v1/users/{uid}/preferences", Route(access: .server, accepts: Route.json) { (context: Context) in
            let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
            let patch = try context.request.jsonBody()
            let view = try context.services.database.withTransaction { connection -> JSONValue in
                try PreferenceStore.lockPreferences(app: context.app, uid: uid, on: connection)
                let store = PreferenceStore()
                let settings = try store.settings(app: context.app, on: connection)
                var preferences = try store.preferences(app: context.app, uid: uid, on: connection)
                try preferences.apply(patch: patch, app: settings)
                try store.savePreferences(preferences, app: context.app, uid: uid, on: connection)
                return preferences.effectiveJSON(app: settings)
            }
            return .json(view)
        })
        router.add(.delete, "/v1/users/{uid}/preferences", Route(access: .server) { (context: Context) in
            let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
            let view = try context.services.database.withConnection { connection -> JSONValue in
                let store = PreferenceStore()
                try store.savePreferences(UserPreferences(), app: context.app, uid: uid, on: connection)
                return UserPreferences().effectiveJSON(app: try store.settings(app: context.app, on: connection))
            }
            return .json(view)
        })

        router.add(.get, "/v1/users/{uid}/mutes", Route(access: .server) { (context: Context) in
            let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
            return .json(try context.services.database.withConnection {
                try PreferenceStore().mutes(app: context.app, uid: uid, on: $0)
            })
        })
        router.add(.put, "/v1/users/{uid}/mutes", Route(access: .server, accepts: Route.json) { try changeMutes($0, add: true) })
        router.add(.delete, "/v1/users/{uid}/mutes", Route(access: .server, accepts: Route.json) { try changeMutes($0, add: false) })
    }

    /// PUT adds or updates mutes; DELETE removes them. One invalid entry: 400, nothing saved.
    package static func changeMutes(_ context: Context, add: Bool) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        guard case .array(let entries)? = try context.request.jsonObject()["conversations"] else {
            throw PreferenceField.invalid("conversations must be an array", field: "conversations")
        }
        let now = currentTimeMilliseconds()
        var ids: [String] = [], types: [String] = [], untils: [Int64] = []
        for (index, entry) in entries.enumerated() {
            let path = "conversations[\(index)]"
            guard case .object(let object) = entry else { throw PreferenceField.invalid("\(path) must be an object", field: path) }
            guard let id = object["id"]?.stringValue, Identifier.isValid(id) else {
                throw PreferenceField.invalid("\(path).id must be a guid or uid", field: path + ".id")
            }
            guard case .string(let type)? = object["type"], type == "group" || type == "oneOnOne" else {
                throw PreferenceField.invalid("\(path).type must be group or oneOnOne", field: path + ".type")
            }
            var until: Int64 = 0
            if add {
                guard case .int(let value)? = object["until"], Int64(value) > now else {
                    throw PreferenceField.invalid("\(path).until must be a time in the future (epoch ms)", field: path + ".until")
                }
                until = Int64(value)
            }
            ids.append(id); types.append(type); untils.append(until)
        }
        let app = context.app
        let mutes = try context.services.database.withTransaction { connection -> Mutes in
            let store = PreferenceStore()
            if add {
                try store.mute(app: app, uid: uid, conversations: ids, types: types, until: untils, on: connection)
            } else {
                try store.unmute(app: app, uid: uid, conversations: ids, types: types, on: connection)
            }
            return try PreferenceStore().mutes(app: app, uid: uid, on: connection)
        }
        return .json(mutes)
    }
}
