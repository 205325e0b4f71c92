import HeraldDomain
import JSON
import Postgres
import Secrets

/// An app's token keys in PostgreSQL (`token_keys`), and the one lookup each user token costs.
package struct TokenKeyStore: Sendable {
    package init() {}

    /// A key as the API lists it: never its secret.
    package struct Info: Sendable, JSONWritable {
        package let kid: String
        package let alg: String
        package let createdAt: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { $0.field("alg", alg); $0.field("createdAt", createdAt); $0.field("kid", kid) }
        }
    }

    /// A key as created: an HS256 key's secret is in it this once.
    package struct Created: Sendable, JSONWritable {
        package let kid: String
        package let alg: String
        package let secret: String?
        package let createdAt: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { created in
                created.field("alg", alg)
                created.field("createdAt", createdAt)
                created.field("kid", kid)
                if let secret { created.field("secret", secret) }
            }
        }
    }

    /// What verifying a token needs: the key's row and its app's CORS and rate settings.
    package struct Lookup: Sendable {
        package let app: String
        package let algorithm: UserToken.Algorithm
        package let secret: [UInt8]?
        package let publicKey: String?
        package let access: UserAccessSettings
    }

    /// Most keys an app may hold at once (rotation needs two; a key per backend service a few).
    package static let maxKeysPerApp = 100

    /// Stores a new key; nil when the app already has `maxKeysPerApp`. Run in a transaction: the
    /// app's lock makes the count and the insert one step, so concurrent creations keep the cap.
    package func create(app: String, algorithm: UserToken.Algorithm, publicKey: String?, on connection: PostgresConnection) throws -> Created? {
        try connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app) || ':token-keys', 0))")
        let kid = "tk_" + Secrets.hex(Secrets.randomBytes(12))
        let secret = algorithm == .hs256 ? Base64URL.encode(Secrets.randomBytes(32)) : nil
        // Counted under the app's token-key lock, then inserted with VALUES: Citus 13 cannot send
        // an INSERT … SELECT … RETURNING into a reference table. The caller's transaction holds the
        // lock to its end, so two creations cannot both pass the count.
        let count = try connection.query("""
            SELECT pg_advisory_xact_lock(hashtextextended(\(app) || ':token-keys', 0)),
                   (SELECT count(*) FROM token_keys WHERE app = \(app)) AS n
            """)[0].decode("n", as: Int.self)
        guard count < Self.maxKeysPerApp else { return nil }
        let rows = try connection.query("""
            INSERT INTO token_keys (kid, app, alg, secret, public_key)
            VALUES (\(kid), \(app), \(algorithm.rawValue), \(secret.map { PostgresBytes(Array($0.utf8)) }), \(publicKey))
            RETURNING created_at
            """)
        guard let row = rows.first else { return nil }
        return Created(kid: kid, alg: algorithm.rawValue, secret: secret, createdAt: try row.decode(0))
    }

    package func list(app: String, on connection: PostgresConnection) throws -> [Info] {
        try connection.query("SELECT kid, alg, created_at FROM token_keys WHERE app = \(app) ORDER BY created_at, kid").map {
            Info(kid: try $0.decode("kid"), alg: try $0.decode("alg"), createdAt: try $0.decode("created_at"))
        }
    }

    /// Deletes a key of `app`; false when the app has none with this kid.
    package func delete(app: String, kid: String, on connection: PostgresConnection) throws -> Bool {
        !(try connection.query("DELETE FROM token_keys WHERE app = \(app) AND kid = \(kid) RETURNING kid")).isEmpty
    }

    /// The key `kid` names, with its app's settings for user requests; one indexed read.
    package func lookup(kid: String, on connection: PostgresConnection) throws -> Lookup? {
        let rows = try connection.query("""
            SELECT k.app, k.alg, k.secret, k.public_key,
                   s.settings -> 'corsOrigins' AS cors_origins, s.settings -> 'userRateLimit' AS user_rate_limit
            FROM token_keys k LEFT JOIN app_settings s ON s.app = k.app
            WHERE k.kid = \(kid)
            """)
        guard let row = rows.first, let algorithm = UserToken.Algorithm(rawValue: try row.decode("alg")) else { return nil }
        return Lookup(app: try row.decode("app"), algorithm: algorithm,
                      secret: try row.decode("secret", as: PostgresBytes?.self)?.bytes,
                      publicKey: try row.decode("public_key"),
                      access: UserAccessSettings(corsOrigins: try row.decode("cors_origins"),
                                                 userRateLimit: try row.decode("user_rate_limit")))
    }

    /// Whether any app lists `origin` in `corsOrigins` (a preflight carries no token).
    package func anyAppAllows(origin: String, on connection: PostgresConnection) throws -> Bool {
        !(try connection.query("SELECT 1 FROM app_settings WHERE settings -> 'corsOrigins' ? \(origin) LIMIT 1")).isEmpty
    }
}
