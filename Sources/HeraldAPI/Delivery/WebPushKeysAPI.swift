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
                if let existing = try read(app: context.app, on: connection) { return (existing, false) }
                guard let key = PrivateKey.ec(curve: "P-256"), let point = key.p256PublicPoint else { throw HTTPError.internalError }
                let publicKey = Base64URL.encode(point)
                // a concurrent POST may have made one first: then that one is the app's
                let rows = try connection.query("""
                    INSERT INTO delivery_credentials (app, kind, secret, public) VALUES (\(context.app), 'vapid', \(key.pkcs8PEM), \(publicKey))
                    ON CONFLICT (app, kind) DO NOTHING RETURNING public
                    """)
                if rows.isEmpty, let existing = try read(app: context.app, on: connection) { return (existing, false) }
                return (publicKey, true)
            }
            return .json(JSONValue.object(["publicKey": .string(publicKey)]), status: made ? 201 : 200)
        })
        router.add(.get, path, Route(access: .server) { (context: Context) in
            guard let publicKey = try context.services.database.withConnection({ try read(app: context.app, on: $0) }) else {
                throw HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "the app has no Web Push key pair: POST \(path) makes one")
            }
            return .json(JSONValue.object(["publicKey": .string(publicKey)]))
        })
    }

    /// The app's VAPID public key (base64url of the uncompressed point), if it has one.
    package static func read(app: String, on connection: PostgresConnection) throws -> String? {
        try connection.query("SELECT public FROM delivery_credentials WHERE app = \(app) AND kind = 'vapid'").first?.decode(0, as: String?.self)
    }
}
