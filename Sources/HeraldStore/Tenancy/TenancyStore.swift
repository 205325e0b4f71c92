import HeraldDomain
import JSON
import Postgres

/// Apps and keys in PostgreSQL; shared by the admin API and the CLI.
package struct TenancyStore: Sendable {
    package struct App: Sendable, Equatable, JSONWritable {
        package let id: String
        package let createdAt: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { $0.field("createdAt", createdAt); $0.field("id", id) }
        }
    }

    package struct KeyInfo: Sendable, Equatable, JSONWritable {
        package let id: String
        package let role: Role
        package let label: String?
        package let createdAt: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { key in
                key.field("createdAt", createdAt)
                key.field("id", id)
                if let label { key.field("label", label) }
                key.field("role", role.rawValue)
            }
        }
    }

    /// A key as created: the only time its secret is known.
    package struct CreatedKey: Sendable, Equatable, JSONWritable {
        package let id: String
        package let key: String
        package let role: Role
        package let label: String?
        package let createdAt: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { created in
                created.field("createdAt", createdAt)
                created.field("id", id)
                created.field("key", key)
                if let label { created.field("label", label) }
                created.field("role", role.rawValue)
            }
        }
    }

    /// What authentication needs of a key.
    package struct StoredKey: Sendable {
        package let app: String
        package let role: Role
        package let secretHash: [UInt8]
    }

    package init() {}

    /// Creates an app; `nil` when the id exists already.
    package func createApp(_ id: String, on connection: PostgresConnection) throws -> App? {
        let rows = try connection.query(
            "INSERT INTO apps (id) VALUES (\(id)) ON CONFLICT (id) DO NOTHING RETURNING id, created_at")
        guard let row = rows.first else { return nil }
        return App(id: try row.decode(0), createdAt: try row.decode(1))
    }

    package func appExists(_ id: String, on connection: PostgresConnection) throws -> Bool {
        !(try connection.query("SELECT 1 FROM apps WHERE id = \(id)")).isEmpty
    }

    /// Apps ordered by id, after `afterID`, at most `limit`.
    package func listApps(after afterID: String?, limit: Int, on connection: PostgresConnection) throws -> [App] {
        try connection.query(
            "SELECT id, created_at FROM apps WHERE \(afterID)::text IS NULL OR id > \(afterID) ORDER BY id LIMIT \(limit)").map { App(id: try $0.decode(0), createdAt: try $0.decode(1)) }
    }

    /// Creates a key for an existing app; `nil` when the app does not exist.
    package func createKey(app: String, role: Role, label: String?, on connection: PostgresConnection) throws -> CreatedKey? {
        let key = APIKey.generate()
        // VALUES, not INSERT … SELECT FROM apps: the app's existence is the foreign key's to
        // check (Citus 13 cannot send an INSERT … SELECT … RETURNING into a reference table).
        let rows: PostgresRows
        do {
            rows = try connection.query("""
                INSERT INTO app_keys (id, app_id, role, label, secret_hash)
                VALUES (\(key.id), \(app), \(role.rawValue), \(label), \(PostgresBytes(key.secretHash)))
                RETURNING created_at
                """)
        } catch let error as PostgresError where error.sqlState == PostgresError.SQLState.foreignKeyViolation {
            return nil
        }
        guard let row = rows.first else { return nil }
        return CreatedKey(id: key.id, key: key.token, role: role, label: label, createdAt: try row.decode(0))
    }

    /// The app's keys that are not revoked, oldest first.
    package func listKeys(app: String, on connection: PostgresConnection) throws -> [KeyInfo] {
        try connection.query("""
            SELECT id, role, label, created_at FROM app_keys
            WHERE app_id = \(app) AND revoked_at IS NULL ORDER BY created_at, id
            """).map { row in
            KeyInfo(id: try row.decode("id"), role: Role(rawValue: try row.decode("role")) ?? .server,
                    label: try row.decode("label"), createdAt: try row.decode("created_at"))
        }
    }

    /// Revokes a key of `app`; false when the app has no such key. Revoking twice is fine.
    package func revokeKey(app: String, id: String, on connection: PostgresConnection) throws -> Bool {
        let rows = try connection.query("""
            UPDATE app_keys SET revoked_at = least(revoked_at, herald_now_ms()) -- least: the first revocation stays (NULL is ignored); Citus refuses volatile calls in coalesce
            WHERE app_id = \(app) AND id = \(id) RETURNING id
            """)
        return !rows.isEmpty
    }

    /// The live (not revoked) key with this id.
    package func liveKey(id: String, on connection: PostgresConnection) throws -> StoredKey? {
        let rows = try connection.query(
            "SELECT app_id, role, secret_hash FROM app_keys WHERE id = \(id) AND revoked_at IS NULL")
        guard let row = rows.first, let role = Role(rawValue: try row.decode("role")) else { return nil }
        return StoredKey(app: try row.decode("app_id"), role: role, secretHash: try row.decode("secret_hash", as: PostgresBytes.self).bytes)
    }
}
