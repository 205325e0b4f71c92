import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// The membership snapshot (SPEC §4): `PUT/GET /v1/groups/{guid}/members` (server role).
package enum MembershipAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static let maxMembers = 100_000

    package static func register(in router: inout Router<Route>) {
        router.add(.put, "/v1/groups/{guid}/members", Route(access: .server, accepts: Route.json, handler: replace))
        router.add(.get, "/v1/groups/{guid}/members", Route(access: .server, handler: list))
    }

    /// Members changed by one snapshot from which group_members is analyzed after it.
    package static let analyzeAfter = 1000

    package struct Snapshot: Decodable {
        package let members: [JSONValue]
    }

    /// Replaces the member set, as evidence at the database's clock: users listed and not members
    /// join now; members not listed are removed now. Their subscriptions follow (SPEC §5.3).
    package static func replace(_ context: Context) throws -> Response {
        let guid = try Identifier.validate(context.parameter("guid"), field: "guid")
        let body = try context.request.decodeJSON(Snapshot.self)
        guard body.members.count <= maxMembers else {
            throw HTTPError.badRequest("members holds at most \(maxMembers) uids", field: "members", params: ["max": .int(maxMembers)])
        }
        var members: [String] = []
        var seen: Set<String> = []
        for (index, value) in body.members.enumerated() {
            guard let uid = value.stringValue, Identifier.isValid(uid) else {
                throw HTTPError.badRequest("members[\(index)] must be a uid", field: "members[\(index)]")
            }
            if seen.insert(uid).inserted { members.append(uid) }
        }
        let app = context.app
        try context.services.database.withConnection { connection in
            let changedCount = try connection.withTransaction { connection -> Int in
                var locks = LockSet()
                locks.group(guid)
                try locks.lock(app: app, on: connection)
                let changed = try connection.query("""
                    WITH now AS (SELECT herald_now_ms() AS at),
                    listed AS (SELECT DISTINCT unnest(\(members)::text[]) AS uid),
                    current AS (SELECT uid FROM group_members
                                 WHERE app = \(app) AND group_id = \(guid) AND joined_at IS NOT NULL
                                   AND joined_at > coalesce(removed_at, -1)),
                    changes AS (
                        SELECT l.uid, true AS joined FROM listed l WHERE l.uid NOT IN (SELECT uid FROM current)
                        UNION ALL
                        SELECT c.uid, false FROM current c WHERE c.uid NOT IN (SELECT uid FROM listed)
                    ),
                    evidence AS (
                        INSERT INTO member_events (app, group_id, uid, at, joined)
                        SELECT \(app), \(guid), c.uid, now.at, c.joined FROM changes c, now
                        ON CONFLICT DO NOTHING
                    ),
                    summary AS (
                        INSERT INTO group_members AS g (app, group_id, uid, joined_at, removed_at)
                        SELECT \(app), \(guid), c.uid, CASE WHEN c.joined THEN now.at END, CASE WHEN NOT c.joined THEN now.at END
                          FROM changes c, now
                        ON CONFLICT (app, group_id, uid) DO UPDATE SET
                            joined_at = greatest(g.joined_at, EXCLUDED.joined_at),
                            removed_at = greatest(g.removed_at, EXCLUDED.removed_at)
                    )
                    SELECT uid FROM changes
                    """)
                // A separate statement, so that it sees the evidence just written.
                let uids = try changed.map { try $0.decode(0, as: String.self) }
                if !uids.isEmpty {
                    try connection.query("SELECT herald_apply(\(app), '{}', '{}', '{}', '{}', '{}', \(Array(repeating: guid, count: uids.count)), \(uids), '{}', '{}', '{}')")
                }
                return uids.count
            }
            // A snapshot that changed many members (a new large group, a bulk import) leaves the
            // planner's statistics of group_members behind until autovacuum's next visit, and the
            // prepared statements that check membership were seen to probe (app, group) and filter
            // every member for each one (minutes for the first batch of 10,000 mentions). Analyzing
            // now, after the commit, re-plans them for the next request; it samples at most
            // 30,000 rows, a fraction of what such a snapshot wrote.
            if changedCount >= analyzeAfter {
                try connection.execute(unsafeSQL: "ANALYZE group_members")
            }
        }
        return .json(MemberCount(count: members.count))
    }

    package static func list(_ context: Context) throws -> Response {
        let guid = try Identifier.validate(context.parameter("guid"), field: "guid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try list.position(kind: "members")
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                SELECT uid, jsonb_build_object('uid', uid, 'since', joined_at)::text FROM group_members
                 WHERE app = \(context.app) AND group_id = \(guid) AND joined_at IS NOT NULL AND joined_at > coalesce(removed_at, -1)
                   AND (\(after)::text IS NULL OR uid > \(after))
                 ORDER BY uid LIMIT \(list.limit + 1)
                """)
        }
        return try list.page(rows, kind: "members")
    }
}

/// `PUT /v1/groups/{guid}/members`: how many members the snapshot holds.
package struct MemberCount: JSONWritable {
    package let count: Int
    package func write(to writer: inout JSONWriter) { writer.object { $0.field("count", count) } }
}
