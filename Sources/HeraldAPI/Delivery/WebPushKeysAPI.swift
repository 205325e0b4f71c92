import HeraldDomain
import HeraldStore
import HTTPServer
import JSON
import Postgres
import Secrets

/// SPEC §13.4: the app's VAPID key pair for Web Push. `POST /v1/settings/delivery/webpush-keys`
/// makes it (201) — or, when the app has one, answers it (200) without replacing it, since every
/// browser subscription made with the old public key would stop working — and `GET` answers it
/// (404 before one is made). Only the public key ever leaves Herald.
package enum WebPushKeysAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static let path = "/v1/settings/delivery/webpush-keys"

    package static func register(in router: inout Router<Route>) {
        router.add(.post, path, Route(access: .server) { (context: Context) in
            let (publicKey, made) = try context.services.database.withTransaction { connection -> (String, Bool) in
                if let existing = try DeliveryCredentials.vapidPublicKey(app: context.app, on: connection) { return (existing, false) }
                guard let key = PrivateKey.ec(curve: "P-256"), let point = key.p256PublicPoint else { throw HTTPError.internalError }
                let publicKey = Base64URL.encode(point)
                // a concurrent POST may have made one first: then that one is the app's
                if !(try DeliveryCredentials.storeVAPID(app: context.app, pem: key.pkcs8PEM, publicKey: publicKey, on: connection)),
                   let existing = try DeliveryCredentials.vapidPublicKey(app: context.app, on: connection) {
                    return (existing, false)
                }
                return (publicKey, true)
            }
            return .json(JSONValue.object(["publicKey": .string(publicKey)]), status: made ? 201 : 200)
        })
        router.add(.get, path, Route(access: .server) { (context: Context) in
            guard let publicKey = try context.services.database.withConnection({ try DeliveryCredentials.vapidPublicKey(app: context.app, on: $0) }) else {
                throw HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "the app has no Web Push key pair: POST \(path) makes one")
            }
            return .json(JSONValue.object(["publicKey": .string(publicKey)]))
        })
    }
}
