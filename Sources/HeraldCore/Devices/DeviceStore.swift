import JSON
import Postgres

/// A device's platform (SPEC §13.1): which protocol its pushes take (SPEC §13.3–13.4). The
/// database keeps the name.
package enum Platform: String, Sendable, CaseIterable {
    case apns, fcm, webpush, webhook

    /// `apns, fcm, webpush or webhook`, for messages.
    package static let names = allCases.dropLast().map(\.rawValue).joined(separator: ", ") + " or " + allCases.last!.rawValue
}

/// A device as the API shows it (SPEC §13.1): where to push, and when it was registered.
package struct Device: Sendable, JSONWritable {
    package let target: Target
    package let createdAt: Int64
    package let updatedAt: Int64

    package init(row: PostgresRow) throws {
        let name: String = try row.decode("platform")
        guard let platform = Platform(rawValue: name) else { throw PostgresError(code: .decoding, message: "an unknown device platform \(name)") }
        target = Target(id: try row.decode("id"), platform: platform, token: try row.decode("token"),
                        topic: try row.decode("topic"), sandbox: try row.decode("sandbox"))
        createdAt = try row.decode("created_at")
        updatedAt = try row.decode("updated_at")
    }

    package func write(to writer: inout JSONWriter) {
        writer.object { device in
            target.writeFields(to: &device)
            device.field("createdAt", createdAt)
            device.field("updatedAt", updatedAt)
        }
    }

    /// The device as a job carries it: where to push, without the bookkeeping.
    package struct Target: Sendable, JSONWritable {
        package let id: String
        package let platform: Platform
        package let token: String
        package let topic: String?
        package let sandbox: Bool

        package func write(to writer: inout JSONWriter) {
            writer.object { writeFields(to: &$0) }
        }

        /// A select-list expression: the devices of job `j`'s recipient as a JSON array (read in
        /// the job's own statement, an index probe per job, rather than by a statement of its own).
        package static let recipientDevices: SQL = """
            (SELECT json_agg(json_build_array(d.id, d.platform, d.token, d.topic, d.sandbox) ORDER BY d.created_at, d.id)::text
               FROM devices d WHERE d.app = j.app AND d.uid = j.recipient AND d.id IS DISTINCT FROM j.exclude_device
                                AND (j.delivered_devices IS NULL OR d.id <> ALL (j.delivered_devices)))
            """

        /// The targets of `recipientDevices`' text (nil: no device).
        package static func list(json: String?) throws -> [Target] {
            guard let json else { return [] }
            guard case .array(let rows) = try JSONParser.parse(Array(json.utf8)) else { return [] }
            return rows.compactMap { row in
                guard case .array(let fields) = row, fields.count == 5, case .string(let id) = fields[0],
                      case .string(let name) = fields[1], let platform = Platform(rawValue: name), case .string(let token) = fields[2],
                      case .bool(let sandbox) = fields[4] else { return nil }
                let topic: String? = if case .string(let text) = fields[3] { text } else { nil }
                return Target(id: id, platform: platform, token: token, topic: topic, sandbox: sandbox)
            }
        }

        package func writeFields(to device: inout JSONWriter) {
            device.field("id", id)
            device.field("platform", platform.rawValue)
            device.field("token", token)
            device.field("topic", topic)
            device.field("sandbox", sandbox)
        }
    }
}

/// Devices in PostgreSQL.
package struct DeviceStore: Sendable {
    package static let maxPerUser = 100
    package static let columns: SQL = "id, platform, token, topic, sandbox, created_at, updated_at"

    package enum Registration {
        case saved(Device)
        case limitReached
    }

    /// Adds or replaces device `id` of `uid`. A device with the same platform and token elsewhere
    /// (another user, or another id) is removed: the token has moved here. Runs in a transaction.
    package func register(app: String, uid: String, id: String, platform: Platform, token: String, topic: String?, sandbox: Bool,
                  on connection: PostgresConnection) throws -> Registration {
        try connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\(app) || ':devices:' || \(uid), 0))")
        // The token moves here: its device elsewhere goes (first, so the unique index is free).
        try connection.query("""
            DELETE FROM devices d
             WHERE d.app = \(app) AND d.platform = \(platform.rawValue) AND md5(d.token) = md5(\(token)) AND d.token = \(token)
               AND NOT (d.uid = \(uid) AND d.id = \(id))
            """)
        let rows = try connection.query("""
            INSERT INTO devices AS d (app, uid, id, platform, token, topic, sandbox)
            SELECT \(app), \(uid), \(id), \(platform.rawValue), \(token), \(topic), \(sandbox)
             WHERE EXISTS (SELECT 1 FROM devices WHERE app = \(app) AND uid = \(uid) AND id = \(id))
                OR (SELECT count(*) FROM devices WHERE app = \(app) AND uid = \(uid)) < \(Self.maxPerUser)
            ON CONFLICT (app, uid, id) DO UPDATE
               SET platform = EXCLUDED.platform, token = EXCLUDED.token, topic = EXCLUDED.topic,
                   sandbox = EXCLUDED.sandbox, updated_at = herald_now_ms()
            RETURNING \(Self.columns)
            """)
        guard let row = rows.first else { return .limitReached }
        return .saved(try Device(row: row))
    }

    package func list(app: String, uid: String, on connection: PostgresConnection) throws -> [Device] {
        try connection.query("SELECT \(Self.columns) FROM devices WHERE app = \(app) AND uid = \(uid) ORDER BY created_at, id").map(Device.init(row:))
    }

    /// Removes a device; false when there was none.
    package func remove(app: String, uid: String, id: String, on connection: PostgresConnection) throws -> Bool {
        !(try connection.query("DELETE FROM devices WHERE app = \(app) AND uid = \(uid) AND id = \(id) RETURNING id")).isEmpty
    }

    /// Removes devices by (uid, id): the bad-token feedback of an ack.
    package func remove(app: String, pairs: [(uid: String, id: String)], on connection: PostgresConnection) throws {
        guard !pairs.isEmpty else { return }
        try connection.query("""
            DELETE FROM devices d USING unnest(\(pairs.map(\.uid))::text[], \(pairs.map(\.id))::text[]) AS x(uid, id)
             WHERE d.app = \(app) AND d.uid = x.uid AND d.id = x.id
            """)
    }
}
