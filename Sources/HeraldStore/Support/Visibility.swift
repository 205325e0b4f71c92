import Postgres

/// SPEC §12's visibility of a message to a user, as SQL fragments every reader shares.
package enum Visibility {
    /// A live message `m`: seen, not deleted, nor its thread (nor, through it, its group).
    package static let live: SQL = """
        m.created_seen AND m.deleted_at IS NULL
        AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.app = m.app AND t.parent_id = coalesce(m.parent_id, m.id)
                           AND t.deleted_at IS NOT NULL)
        """

    /// Whether user `uid` (a parameter) can still see conversation `c`'s messages: a member of its
    /// group now, or one of its two users.
    package static func access(_ c: SQL, uid: SQL) -> SQL {
        """
        CASE WHEN \(c).group_id IS NULL THEN \(uid) IN (\(c).user_a, \(c).user_b)
             ELSE EXISTS (SELECT 1 FROM group_members g WHERE g.app = \(c).app AND g.group_id = \(c).group_id AND g.uid = \(uid)
                             AND g.joined_at > coalesce(g.removed_at, -1)) END
        """
    }
}
