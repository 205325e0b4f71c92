import Postgres

/// SPEC §12's visibility of a message to a user, as SQL fragments every reader shares. Each
/// subquery names the app itself (a parameter), not the outer row's: Citus routes a statement to
/// the app's worker only when it sees the app on every table (docs/scaling.md).
package enum Visibility {
    /// A live message `m` of `app`: seen, not deleted, nor its thread (nor its group, through
    /// the thread row, which exists once the thread's parent or a reply was seen). Read by
    /// everything that shows a message or routes its creation: the routing (`Fanout`,
    /// `CatchUp`, `FanoutWorker`), explain (`ExplainInputs`) and the pin and save lists. The
    /// thread through its key, a scalar subquery (an EXISTS became a join that read the app's
    /// every thread, 100 times a round of W1); a message whose thread row is not derived yet
    /// is live.
    package static func live(app: String) -> SQL {
        "m.created_seen AND \(undeleted(app: app))"
    }

    /// A message `m` of `app` not deleted, nor its thread (nor, through it, its group), whether
    /// its creation was seen or not: what an edit reads (it may come first, SPEC §4).
    package static func undeleted(app: String) -> SQL {
        """
        m.deleted_at IS NULL
        AND coalesce((SELECT t.deleted_at IS NULL FROM threads t WHERE t.app = \(app) AND t.parent_id = coalesce(m.parent_id, m.id)), true)
        """
    }

    /// Whether user `uid` (a parameter) can still see conversation `c`'s messages (of `app`): a member of its
    /// group now, or one of its two users.
    package static func access(_ c: SQL, uid: SQL, app: String) -> SQL {
        """
        CASE WHEN \(c).group_id IS NULL THEN \(uid) IN (\(c).user_a, \(c).user_b)
             ELSE EXISTS (SELECT 1 FROM group_members g WHERE g.app = \(app) AND g.group_id = \(c).group_id AND g.uid = \(uid)
                             AND herald_member_now(g.joined_at, g.removed_at)) END
        """
    }
}
