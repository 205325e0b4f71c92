import HeraldDomain
import Postgres
import Secrets

/// The secrets of direct delivery (SPEC §13.4) in `delivery_credentials`: the APNs key (`apns`),
/// the FCM service account's key (`fcm`) and the Web Push key pair (`vapid`, made by
/// `WebPushKeysAPI`). Written by the settings PATCH that gives them; read only by the deliverer.
package enum DeliveryCredentials {
    /// One stored key: its kind, its PEM, and when it was stored (a new key is a new stamp, which
    /// tells a deliverer to drop the tokens it made with the old one).
    package struct Stored: Sendable, Equatable {
        package let kind: CredentialKind
        package let pem: String
        package let storedAt: Int64
    }

    /// Stores or removes the keys a PATCH gave. Runs in the PATCH's transaction.
    package static func store(_ changes: [CredentialChange], app: String, on connection: PostgresConnection) throws {
        for change in changes {
            if let pem = change.pem {
                try connection.query("""
                    INSERT INTO delivery_credentials (app, kind, secret) VALUES (\(app), \(change.kind.rawValue), \(pem))
                    ON CONFLICT (app, kind) DO UPDATE SET secret = EXCLUDED.secret, created_at = EXCLUDED.created_at
                    """)
            } else {
                try connection.query("DELETE FROM delivery_credentials WHERE app = \(app) AND kind = \(change.kind.rawValue)")
            }
        }
    }

    /// The app's keys.
    package static func load(app: String, on connection: PostgresConnection) throws -> [Stored] {
        try connection.query("SELECT kind, secret, created_at FROM delivery_credentials WHERE app = \(app) ORDER BY kind").compactMap { row in
            guard let kind = CredentialKind(rawValue: try row.decode("kind")) else { return nil }
            return Stored(kind: kind, pem: try row.decode("secret"), storedAt: try row.decode("created_at"))
        }
    }

    /// The app's VAPID public key (base64url of the uncompressed point), if it has one.
    package static func vapidPublicKey(app: String, on connection: PostgresConnection) throws -> String? {
        try connection.query("SELECT public FROM delivery_credentials WHERE app = \(app) AND kind = 'vapid'").first?.decode(0, as: String?.self)
    }

    /// Stores the app's VAPID key pair unless it has one; returns whether this one was stored.
    package static func storeVAPID(app: String, pem: String, publicKey: String, on connection: PostgresConnection) throws -> Bool {
        try !connection.query("""
            INSERT INTO delivery_credentials (app, kind, secret, public) VALUES (\(app), 'vapid', \(pem), \(publicKey))
            ON CONFLICT (app, kind) DO NOTHING RETURNING public
            """).isEmpty
    }
}
