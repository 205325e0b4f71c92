import HeraldDomain
import Postgres

/// A group's membership as a snapshot sets it (SPEC §5.1's `PUT …/members`), and its list.
package enum MembershipStore {
    /// Makes `members` the group's members now: who is listed and was not a member joins, who is
    /// a member and is not listed leaves, as membership evidence at this moment; then the
    /// derived state of the changed members. Returns how many changed.
    @discardableResult
    package static func replace(app: String, group: String, members: [String], analyzeAfter: Int,
                                on connection: PostgresConnection) throws -> Int {
        let changedCount = try connection.withTransaction { connection -> Int in
            var locks = LockSet()
            locks.group(group)
            try locks.lock(app: app, on: connection)
            let changed = try connection.query("""
                WITH now AS (SELECT herald_now_ms() AS at),
                listed AS (SELECT DISTINCT unnest(\(members)::text[]) AS uid),
                current AS (SELECT uid FROM group_members
                             WHERE app = \(app) AND group_id = \(group) AND joined_at IS NOT NULL
                               AND herald_member_now(joined_at, removed_at)),
                changes AS (
                    SELECT l.uid, true AS joined FROM listed l WHERE l.uid NOT IN (SELECT uid FROM current)
                    UNION ALL
                    SELECT c.uid, false FROM current c WHERE c.uid NOT IN (SELECT uid FROM listed)
                ),
                evidence AS (
                    INSERT INTO member_events (app, group_id, uid, at, joined)
                    SELECT \(app), \(group), c.uid, now.at, c.joined FROM changes c, now
                    ON CONFLICT DO NOTHING
                ),
                summary AS (
                    INSERT INTO group_members AS g (app, group_id, uid, joined_at, removed_at)
                    SELECT \(app), \(group), c.uid, CASE WHEN c.joined THEN now.at END, CASE WHEN NOT c.joined THEN now.at END
                      FROM changes c, now
                     -- in the order the fan-out walks a group (group_members_walk): the new rows
                     -- of a large snapshot lie in that order in the table, so a chunk of the walk
                     -- reads a few pages instead of a page per member
                     ORDER BY c.uid COLLATE "C"
                    ON CONFLICT (app, group_id, uid) DO UPDATE SET
                        joined_at = greatest(g.joined_at, EXCLUDED.joined_at),
                        removed_at = greatest(g.removed_at, EXCLUDED.removed_at)
                )
                SELECT uid FROM changes
                """)
            // A separate statement, so that it sees the evidence just written.
            let uids = try changed.map { try $0.decode(0, as: String.self) }
            if !uids.isEmpty {
                try connection.query("SELECT herald_apply(\(app), '{}', '{}', '{}', '{}', '{}', \(Array(repeating: group, count: uids.count)), \(uids), '{}', '{}', '{}')")
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
        return changedCount
    }

    /// The group's members now after the uid `after` (nil: from the first), in uid order, at most
    /// `limit`: each row its uid and its JSON.
    package static func members(app: String, group: String, after: String?, limit: Int,
                                on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT uid, jsonb_build_object('uid', uid, 'since', joined_at)::text FROM group_members
             WHERE app = \(app) AND group_id = \(group) AND joined_at IS NOT NULL AND herald_member_now(joined_at, removed_at)
               AND (\(after)::text IS NULL OR uid > \(after))
             ORDER BY uid LIMIT \(limit)
            """)
    }
}
