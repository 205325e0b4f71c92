import HeraldDomain
import Postgres
import JSON

/// App settings, user preferences and mutes in PostgreSQL.
package struct PreferenceStore: Sendable {
    package init() {}

    /// The app's settings; `delivery.secretSet`, `delivery.apns.privateKeySet` and
    /// `delivery.fcm.serviceAccountSet` are read from the secrets themselves, in the same
    /// statement (they are not stored with the settings).
    package func settings(app: String, on connection: PostgresConnection) throws -> AppSettings {
        try Self.settings(from: connection.query(Self.settingsQuery(app: app)))
    }

    /// The statement that reads an app's settings (`settings(from:)` reads its row), for a caller
    /// that sends it with others in one round trip.
    package static func settingsQuery(app: String) -> SQL {
        """
        SELECT (SELECT settings::text FROM app_settings WHERE app = \(app)),
               EXISTS (SELECT 1 FROM delivery_secrets WHERE app = \(app) AND (expires_at IS NULL OR expires_at > herald_now_ms())),
               EXISTS (SELECT 1 FROM delivery_credentials WHERE app = \(app) AND kind = 'apns'),
               EXISTS (SELECT 1 FROM delivery_credentials WHERE app = \(app) AND kind = 'fcm')
        """
    }

    package static func settings(from rows: PostgresRows) throws -> AppSettings {
        var settings = AppSettings.defaults
        if let text = try rows[0].decode(0, as: String?.self), let json = try? JSONParser.parse(Array(text.utf8)) {
            settings = AppSettings(stored: json)
        }
        settings.delivery.secretSet = try rows[0].decode(1, as: Bool.self)
        settings.delivery.apns?.privateKeySet = try rows[0].decode(2, as: Bool.self)
        settings.delivery.fcm?.serviceAccountSet = try rows[0].decode(3, as: Bool.self)
        return settings
    }

    package func saveSettings(_ settings: AppSettings?, app: String, on connection: PostgresConnection) throws {
        guard let settings else {
            try connection.query("DELETE FROM app_settings WHERE app = \(app)")
            return
        }
        try connection.query("""
            INSERT INTO app_settings (app, settings, updated_at) VALUES (\(app), \(Self.storedDocument(settings).jsonText)::jsonb, herald_now_ms())
            ON CONFLICT (app) DO UPDATE SET settings = EXCLUDED.settings, updated_at = EXCLUDED.updated_at
            """)
    }

    /// The settings as stored: as the API shows them, without what is derived on reading
    /// (`delivery.secretSet`).
    package static func storedDocument(_ settings: AppSettings) -> JSONValue {
        guard case .object(var root) = settings.json, case .object(var delivery)? = root["delivery"] else { return settings.json }
        delivery["secretSet"] = nil
        for (block, flag) in [("apns", "privateKeySet"), ("fcm", "serviceAccountSet")] {
            if case .object(var object)? = delivery[block] {
                object[flag] = nil
                delivery[block] = .object(object)
            }
        }
        root["delivery"] = .object(delivery)
        return .object(root)
    }

    package func preferences(app: String, uid: String, on connection: PostgresConnection) throws -> UserPreferences {
        let rows = try connection.query("SELECT preferences::text FROM user_preferences WHERE app = \(app) AND uid = \(uid)")
        guard let text = try rows.first?.decode(0, as: String.self), let json = try? JSONParser.parse(Array(text.utf8)) else {
            return UserPreferences()
        }
        return UserPreferences(stored: json)
    }

    package func savePreferences(_ preferences: UserPreferences, app: String, uid: String, on connection: PostgresConnection) throws {
        if preferences.values.isEmpty {
            try connection.query("DELETE FROM user_preferences WHERE app = \(app) AND uid = \(uid)")
            return
        }
        try connection.query("""
            INSERT INTO user_preferences (app, uid, preferences, updated_at) VALUES (\(app), \(uid), \(preferences.stored.jsonText)::jsonb, herald_now_ms())
            ON CONFLICT (app, uid) DO UPDATE SET preferences = EXCLUDED.preferences, updated_at = EXCLUDED.updated_at
            """)
    }

    /// Mutes that have not expired, as `{"conversations": [{"id", "type", "until"}]}`.
    /// The user's mutes in force (SPEC §7.3), by type and id.
    package func mutes(app: String, uid: String, on connection: PostgresConnection) throws -> Mutes {
        let rows = try connection.query("""
            SELECT conversation_id, conversation_type, until FROM user_mutes
             WHERE app = \(app) AND uid = \(uid) AND until > herald_now_ms()
             ORDER BY conversation_type, conversation_id
            """)
        return Mutes(conversations: try rows.map {
            Mutes.Mute(id: try $0.decode("conversation_id"), type: try $0.decode("conversation_type"), until: try $0.decode("until"))
        })
    }
}

/// `GET /v1/users/{uid}/mutes`, and the answer of its `PUT` and `DELETE`.
package struct Mutes: JSONWritable {
    package struct Mute: JSONWritable {
        package let id: String
        package let type: String
        package let until: Int64

        package func write(to writer: inout JSONWriter) {
            writer.object { $0.field("id", id); $0.field("type", type); $0.field("until", until) }
        }
    }

    package let conversations: [Mute]

    package func write(to writer: inout JSONWriter) {
        writer.object { $0.field("conversations", array: conversations) }
    }
}

extension PreferenceStore {
    /// Serialises changes of the app's settings until the transaction ends.
    package static func lockSettings(app: String, on connection: PostgresConnection) throws {
        try connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app) || ':settings', 0))")
    }

    /// Serialises changes of one user's preferences until the transaction ends.
    package static func lockPreferences(app: String, uid: String, on connection: PostgresConnection) throws {
        try connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app) || ':prefs:' || \(uid), 0))")
    }

    /// Mutes each conversation (`types[i]`, `conversations[i]`) until `until[i]` (the latest of
    /// a conversation listed twice), replacing an earlier mute.
    package func mute(app: String, uid: String, conversations: [String], types: [String], until: [Int64],
                      on connection: PostgresConnection) throws {
        try connection.query("""
            INSERT INTO user_mutes (app, uid, conversation_type, conversation_id, until)
            SELECT \(app), \(uid), t, i, max(u) FROM unnest(\(conversations)::text[], \(types)::text[], \(until)::bigint[]) AS x(i, t, u) GROUP BY t, i
            ON CONFLICT (app, uid, conversation_type, conversation_id) DO UPDATE SET until = EXCLUDED.until
            """)
    }

    /// Ends the mutes of the conversations (`types[i]`, `conversations[i]`).
    package func unmute(app: String, uid: String, conversations: [String], types: [String], on connection: PostgresConnection) throws {
        try connection.query("""
            DELETE FROM user_mutes m USING unnest(\(conversations)::text[], \(types)::text[]) AS x(i, t)
             WHERE m.app = \(app) AND m.uid = \(uid) AND m.conversation_id = x.i AND m.conversation_type = x.t
            """)
    }
}
