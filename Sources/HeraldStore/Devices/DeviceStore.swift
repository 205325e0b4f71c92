import HeraldDomain
import JSON
import Postgres

/// A device as its row holds it.
extension Device {
    package init(row: PostgresRow) throws {
        let name: String = try row.decode("platform")
        guard let platform = Platform(rawValue: name) else { throw PostgresError(code: .decoding, message: "an unknown device platform \(name)") }
        self.init(target: Target(id: try row.decode("id"), platform: platform, token: try row.decode("token"),
                                 topic: try row.decode("topic"), sandbox: try row.decode("sandbox")),
                  createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
    }
}

extension Device.Target {
    /// A select-list expression: the devices of job `j`'s recipient as a JSON array, in the
    /// order they were registered (read in the job's own statement, an index probe per job,
    /// rather than by a statement of its own). Sorted by a subquery that reads
    /// `devices_in_order` in its order, not by the aggregate's own ORDER BY, which sorts again
    /// for every job (PostgreSQL 15 sorts an aggregate's input even when it comes sorted); an
    /// aggregate over a sorted subquery takes its rows in that order (`DevicesTests.onJobs`).
    package static func recipientDevices(app: String) -> SQL { """
        (SELECT json_agg(json_build_array(d.id, d.platform, d.token, d.topic, d.sandbox))::text
           FROM (SELECT d.id, d.platform, d.token, d.topic, d.sandbox FROM devices d
                  WHERE d.app = \(app) AND d.uid = j.recipient AND d.id IS DISTINCT FROM j.exclude_device
                    AND (j.delivered_devices IS NULL OR d.id <> ALL (j.delivered_devices))
                  ORDER BY d.created_at, d.id) d)
        """
    }
}

/// Devices in PostgreSQL.
package struct DeviceStore: Sendable {
    package init() {}

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
                   sandbox = EXCLUDED.sandbox, updated_at = EXCLUDED.updated_at
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

    /// Removes devices by (uid, id): the bad-token feedback of an ack. Queued (`send`) in a
    /// transaction: it travels with the next statement.
    package func remove(app: String, pairs: [(uid: String, id: String)], on connection: PostgresConnection) throws {
        guard !pairs.isEmpty else { return }
        try connection.send("""
            DELETE FROM devices d USING unnest(\(pairs.map(\.uid))::text[], \(pairs.map(\.id))::text[]) AS x(uid, id)
             WHERE d.app = \(app) AND d.uid = x.uid AND d.id = x.id
            """)
    }
}
