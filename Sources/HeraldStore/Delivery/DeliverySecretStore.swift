import HeraldDomain
import Postgres

/// The signing secrets of built-in delivery (SPEC §13.3), in `delivery_secrets`.
package struct DeliverySecretStore {
    package init() {}

    /// How long a secret keeps signing after the rotation that replaced it.
    package static let overlapMs: Int64 = 24 * 3600 * 1000

    /// Makes a new current secret. The current one, if any, signs for 24 hours more; secrets
    /// already expired are removed. Runs in the caller's transaction, under the settings lock.
    package func rotate(app: String, on connection: PostgresConnection) throws -> WebhookSecret {
        try connection.query("DELETE FROM delivery_secrets WHERE app = \(app) AND expires_at <= herald_now_ms()")
        try connection.query("UPDATE delivery_secrets SET expires_at = herald_now_ms() + \(Self.overlapMs)::bigint WHERE app = \(app) AND expires_at IS NULL")
        let secret = WebhookSecret.generate()
        try connection.query("INSERT INTO delivery_secrets (app, secret) VALUES (\(app), \(secret.text))")
        return secret
    }

    /// Removes every secret of the app (its settings were reset).
    package func removeAll(app: String, on connection: PostgresConnection) throws {
        try connection.query("DELETE FROM delivery_secrets WHERE app = \(app)")
    }

    /// The live secrets, newest first.
    package func live(app: String, on connection: PostgresConnection) throws -> [WebhookSecret] {
        try connection.query("""
            SELECT secret FROM delivery_secrets WHERE app = \(app) AND (expires_at IS NULL OR expires_at > herald_now_ms())
             ORDER BY id DESC
            """).compactMap { WebhookSecret(try $0.decode(0, as: String.self)) }
    }
}
