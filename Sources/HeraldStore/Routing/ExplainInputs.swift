import HeraldDomain
import Postgres

/// What the explain endpoint (SPEC §8.2) reads to judge one recipient again, as the producers
/// judged them: the message, an edit or a reaction, with the recipient's subscription,
/// preferences, mute, level, the job made and the digest window that held the reply.
package enum ExplainInputs {
    /// The message `messageID` and user `uid`'s inputs for it (no row: no such live message).
    package static func message(app: String, uid: String, messageID: String, on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT m.sender, m.conversation_id, m.receiver_type, m.group_id, m.user_a, m.user_b, m.parent_id, m.sent_at,
                   m.category, m.send_notification, m.mentions_all, m.quoted_sender,
                   \(Visibility.access("m", uid: "\(uid)", app: app)) AS has_access,
                   s.subscribed,
                   EXISTS (SELECT 1 FROM mentions mn WHERE mn.app = \(app) AND mn.message_id = m.id AND mn.at = m.sent_at AND mn.uid = \(uid)) AS mentioned,
                   \(RecipientRow.columns(uid: "\(uid)", app: app)),
                   (SELECT jsonb_build_object('id', 'j' || j.id, 'reason', j.reason)::text FROM jobs j
                     WHERE j.app = \(app) AND j.recipient = \(uid) AND j.message_id = m.id AND j.event_id IS NULL
                     ORDER BY j.id LIMIT 1) AS job,
                   s.since, s.manual_at, s.unsubscribed_at, s.tracked, m.event_source, m.event_id,
                   ap.applied_at, \(digestColumn(app: app, uid: uid))
              FROM messages m
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = \(uid) AND s.thread_id = coalesce(m.parent_id, m.id)
              -- when Herald applied the message's event (kept as long as dedupe keeps it)
              LEFT JOIN LATERAL (SELECT e.received_at AS applied_at FROM events e
                                  WHERE e.app = \(app) AND e.source = m.event_source AND e.id = m.event_id) ap ON true
             -- what the routing reads: a message in a deleted thread or group notified nobody
             WHERE m.app = \(app) AND m.id = \(messageID) AND \(Visibility.live(app: app))
            """)
    }

    /// The edit of `messageID` that event `event` (`<source>/<id>`) brought, and `uid`'s inputs for it.
    package static func edit(app: String, uid: String, messageID: String, event: String, on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT m.sender, m.group_id, m.user_a, m.user_b, m.parent_id, m.category, m.send_notification, v.at AS edited_at,
                   \(Visibility.access("m", uid: "\(uid)", app: app)) AS has_access,
                   -- newly mentioned: in this version's mentions, not in those in force just before it
                   EXISTS (SELECT 1 FROM mentions mn WHERE mn.app = \(app) AND mn.message_id = m.id AND mn.at = v.at AND mn.uid = \(uid))
                     AND NOT coalesce((SELECT \(uid) = ANY (p.mentions) FROM message_versions p
                                        WHERE p.app = \(app) AND p.message_id = m.id AND p.at < v.at AND p.mentions IS NOT NULL
                                        ORDER BY p.at DESC LIMIT 1), false) AS newly_mentioned,
                   s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked,
                   \(RecipientRow.columns(uid: "\(uid)", app: app)),
                   (SELECT jsonb_build_object('id', 'j' || j.id, 'reason', j.reason)::text FROM jobs j
                     WHERE j.app = \(app) AND j.recipient = \(uid) AND j.message_id = m.id
                       AND j.event_source = v.event_source AND j.event_id = v.event_id
                     ORDER BY j.id LIMIT 1) AS job,
                   (SELECT e.received_at FROM events e
                     WHERE e.app = \(app) AND e.source = v.event_source AND e.id = v.event_id) AS applied_at
              FROM messages m
              JOIN message_versions v ON v.app = \(app) AND v.message_id = m.id AND v.event_source || '/' || v.event_id = \(event)
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = \(uid) AND s.thread_id = coalesce(m.parent_id, m.id)
             WHERE m.app = \(app) AND m.id = \(messageID) AND \(Visibility.live(app: app))
            """)
    }

    /// The reaction to `messageID` that event `event` added, and `uid`'s inputs for it.
    package static func reaction(app: String, uid: String, messageID: String, event: String,
                                 on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT r.reactor, r.group_id, r.user_a, r.user_b, r.added_at, r.removed_at, r.added_source, r.added_event_id,
                   coalesce(m.sender, r.message_sender) AS author, coalesce(m.parent_id, r.parent_id) AS parent_id,
                   m.deleted_at IS NOT NULL
                     OR EXISTS (SELECT 1 FROM threads t WHERE t.app = \(app) AND t.deleted_at IS NOT NULL
                                   AND t.parent_id = coalesce(m.parent_id, r.parent_id, r.message_id))
                     OR EXISTS (SELECT 1 FROM deleted_groups d WHERE d.app = \(app) AND d.group_id = r.group_id) AS deleted,
                   CASE WHEN r.group_id IS NULL THEN \(uid) IN (r.user_a, r.user_b)
                        ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at)
                                              AND (r.added_at >= g.joined_at OR herald_member_at(\(app), r.group_id, \(uid), r.added_at))
                                         FROM group_members g WHERE g.app = \(app) AND g.group_id = r.group_id AND g.uid = \(uid)), false) END AS has_access,
                   s.subscribed, s.since, s.manual_at, s.unsubscribed_at,
                   (SELECT up.preferences::text FROM user_preferences up WHERE up.app = \(app) AND up.uid = \(uid)) AS preferences,
                   \(Fanout.mutedUntilOf(uid: "\(uid)", group: "r.group_id", other: "r.reactor", app: "\(app)")) AS muted_until,
                   (SELECT jsonb_build_object('id', 'j' || j.id, 'reason', j.reason, 'state', j.state)::text FROM jobs j
                     WHERE j.app = \(app) AND j.recipient = \(uid) AND j.message_id = r.message_id AND j.subject_id = r.id
                       AND j.kind = 'reaction' ORDER BY j.id LIMIT 1) AS job,
                   (SELECT e.received_at FROM events e
                     WHERE e.app = \(app) AND e.source = r.added_source AND e.id = r.added_event_id) AS applied_at
              FROM reactions r
              LEFT JOIN messages m ON m.app = \(app) AND m.id = r.message_id
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = \(uid) AND s.thread_id = coalesce(m.parent_id, r.parent_id)
             WHERE r.app = \(app) AND r.message_id = \(messageID) AND r.added_at IS NOT NULL AND r.added_source || '/' || r.added_event_id = \(event)
            """)
    }

    /// What became of a reply held for the recipient's thread digest (SPEC §17), from the window
    /// that held it: a select-list expression over the message `m` and its `applied_at`.
    package static func digestColumn(app: String, uid: String) -> SQL { """
        (SELECT jsonb_build_object('closed', w.closed_at IS NOT NULL, 'ends', w.ends_at, 'outcome', w.outcome,
                                   'job', w.digest_job, 'reason', (SELECT j.reason FROM job_rows j WHERE j.app = \(app) AND j.id = w.digest_job),
                                   'included', w.closed_at IS NOT NULL AND EXISTS (
                                       SELECT 1 FROM herald_digest_held(w.app, w.thread_id, w.uid, w.opened_by, w.opened_at, w.ends_at,
                                                                        w.max_age_ms, w.read_at, w.read_id) h
                                        WHERE h.id = m.id))::text
           FROM digest_windows w
          WHERE m.parent_id IS NOT NULL AND w.app = \(app) AND w.thread_id = m.parent_id AND w.uid = \(uid) AND w.opened_by <> m.id
            AND w.opened_at <= ap.applied_at AND ap.applied_at < w.ends_at
          ORDER BY w.opened_at DESC LIMIT 1) AS digest
        """
    }
}
