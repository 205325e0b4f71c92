import Postgres
import JSON

/// App settings, user preferences and mutes in PostgreSQL.
struct PreferenceStore: Sendable {
    func settings(app: String, on connection: PostgresConnection) throws -> AppSettings {
        let rows = try connection.query("SELECT settings::text FROM app_settings WHERE app = $1", [app])
        guard let text = try rows.first?.decode(0, as: String.self), let json = try? JSONParser.parse(Array(text.utf8)) else {
            return .defaults
        }
        return AppSettings(stored: json)
    }

    func saveSettings(_ settings: AppSettings?, app: String, on connection: PostgresConnection) throws {
        guard let settings else {
            try connection.query("DELETE FROM app_settings WHERE app = $1", [app])
            return
        }
        try connection.query("""
            INSERT INTO app_settings (app, settings, updated_at) VALUES ($1, $2::jsonb, herald_now_ms())
            ON CONFLICT (app) DO UPDATE SET settings = EXCLUDED.settings, updated_at = EXCLUDED.updated_at
            """, [app, settings.json.jsonText])
    }

    func preferences(app: String, uid: String, on connection: PostgresConnection) throws -> UserPreferences {
        let rows = try connection.query("SELECT preferences::text FROM user_preferences WHERE app = $1 AND uid = $2", [app, uid])
        guard let text = try rows.first?.decode(0, as: String.self), let json = try? JSONParser.parse(Array(text.utf8)) else {
            return UserPreferences()
        }
        return UserPreferences(stored: json)
    }

    func savePreferences(_ preferences: UserPreferences, app: String, uid: String, on connection: PostgresConnection) throws {
        if preferences.values.isEmpty {
            try connection.query("DELETE FROM user_preferences WHERE app = $1 AND uid = $2", [app, uid])
            return
        }
        try connection.query("""
            INSERT INTO user_preferences (app, uid, preferences, updated_at) VALUES ($1, $2, $3::jsonb, herald_now_ms())
            ON CONFLICT (app, uid) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = EXCLUDED.updated_at
            """, [app, uid, preferences.stored.jsonText])
    }

    /// Mutes that have not expired, as `{"conversations": [{"id", "type", "until"}]}`.
    func mutesJSON(app: String, uid: String, on connection: PostgresConnection) throws -> String {
        let rows = try connection.query("""
            SELECT coalesce(jsonb_agg(jsonb_build_object('id', conversation_id, 'type', conversation_type, 'until', until)
                                      ORDER BY conversation_type, conversation_id), '[]')::text
              FROM user_mutes WHERE app = $1 AND uid = $2 AND until > herald_now_ms()
            """, [app, uid])
        return "{\"conversations\":" + (try rows[0].decode(0, as: String.self)) + "}"
    }
}
