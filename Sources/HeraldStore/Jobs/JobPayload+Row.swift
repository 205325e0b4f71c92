import HeraldDomain
import JSON
import Postgres

/// How a job is read: the SQL that gathers what a payload needs, and its decoding.
extension JobPayload {
    /// The `traceparent` column of a job source: the trace of the event that produced the job
    /// `alias` (its own event, or when it names none — a block — its message's creation), stored
    /// once with the event (`sql/0025_event_traceparent.sql`), not with each job. The event is
    /// read through its key (`OFFSET 0`, as `from`'s look-ups).
    package static func traceOf(_ alias: SQL, app: String) -> SQL {
        """
        (SELECT e.traceparent
           FROM (SELECT \(alias).event_source, \(alias).event_id WHERE \(alias).event_source IS NOT NULL
                 UNION ALL
                 SELECT m.event_source, m.event_id FROM messages m
                  WHERE \(alias).event_source IS NULL AND m.app = \(app) AND m.id = \(alias).message_id) k (source, id)
          CROSS JOIN LATERAL (SELECT e.traceparent FROM events e WHERE e.app = \(app) AND e.source = k.source AND e.id = k.id OFFSET 0) e) AS traceparent
        """
    }

    /// The FROM clause over the jobs `source` (a CTE of jobs, or a subquery, with the job row's
    /// columns and `traceOf`'s `traceparent`) that `columns` reads:
    /// each job `j` and its message `m` (a clear job's thread root, or a reacted message, which may
    /// not have arrived); a reaction's job its reaction `r`, a member action's its action `a`
    /// (each looked up only for its kind of job).
    /// Every table is filtered by `app` itself, and each lateral look-up's condition on the job's
    /// kind sits inside the key it probes: Citus routes a statement to the app's worker only when
    /// it sees the app on every table, and refuses an outer join with a condition on the outer
    /// row alone. Each look-up is a subquery with `OFFSET 0`, so that its key is its index
    /// condition whatever the statistics say: planned with statistics older than the app's rows
    /// (every index that starts with the app then looks like a one-row look-up), a plain join
    /// read the app's messages, reactions and member actions whole and filtered them by the job
    /// (`MigrationTests.claimOfANewApp`).
    package static func from(_ source: SQL, app: String) -> SQL {
        """
        \(source) j
        LEFT JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(app) AND m.id = j.message_id OFFSET 0) m ON true
        LEFT JOIN LATERAL (SELECT r.reactor, r.reaction, r.conversation_id, r.receiver_type, r.group_id, r.message_sender, r.parent_id
                             FROM reactions r
                            WHERE r.app = \(app) AND r.id = CASE WHEN j.kind IN ('reaction', 'retract') THEN j.subject_id END OFFSET 0) r ON true
        LEFT JOIN LATERAL (SELECT a.group_id, a.uid, a.actor, a.action, a.scope, a.at FROM member_actions a
                            WHERE a.app = \(app) AND a.event_source = CASE WHEN j.kind = 'memberAction' THEN j.event_source END
                              AND a.event_id = j.event_id OFFSET 0) a ON true
        """
    }

    /// The select list that `init(row:)` reads by name, over `from(…)`, for jobs of `app`.
    package static func columns(app: String) -> SQL { """
        j.id, j.attempt, j.app, j.recipient, j.created_at,
        coalesce(j.event_source, m.event_source) AS event_source, coalesce(j.event_id, m.event_id) AS event_id,
        coalesce(j.event_type, m.event_type) AS event_type,
        j.reason, j.privacy, \(recipientColumns(app: app)),
        coalesce(j.message_id, '') AS message_id,
        coalesce(m.conversation_id, r.conversation_id, 'group_' || a.group_id, '') AS conversation_id,
        coalesce(m.receiver_type, r.receiver_type, CASE WHEN a.group_id IS NOT NULL THEN 'group' END, '') AS receiver_type,
        coalesce(m.group_id, r.group_id, a.group_id) AS group_id, coalesce(m.sender, r.message_sender, '') AS sender,
        coalesce(m.sent_at, 0) AS sent_at, coalesce(m.parent_id, r.parent_id) AS parent_id, coalesce(m.text, '') AS text, j.last_error,
        j.subject_id, r.reactor, r.reaction, a.uid AS action_uid, a.actor AS action_actor, a.action, a.scope AS action_scope,
        a.at AS action_at, j.sync_at, j.sync_by,
        j.kind AS job_kind, j.exclude_device, array_to_json(j.clear_ids)::text AS clear_ids, j.template_reason, j.traceparent,
        j.digest_count, array_to_json(j.digest_senders)::text AS digest_senders
        """
    }

    /// What a job reads for its recipient when it is claimed (`badge`, `opened_digest`,
    /// `devices`), from the job `j` (its `kind`, `recipient`, `reason`, `message_id`, stored
    /// `badge`, `exclude_device`, `delivered_devices`) and its message `m` (`parent_id`): in
    /// `columns`, and for the jobs of a block made from its first (`JobQueue.blockJobs`).
    package static func recipientColumns(app: String) -> SQL { """
        -- SPEC §9: a notification's badge is the recipient's unread thread count when the job is claimed
        CASE WHEN j.kind IS NULL OR j.kind IN ('update', 'digest')
             THEN (SELECT count(*)::int FROM subscriptions s WHERE s.app = \(app) AND s.uid = j.recipient AND s.visible AND s.has_unread)
             ELSE j.badge END AS badge,
        -- SPEC §17: a digestible reply job that opened a digest window collapses by thread, so
        -- that the digest at the window's end replaces it on the device. A probe of the opener's
        -- key per job (OFFSET 0): without it the planner may hash the app's every window once
        -- per claim (MigrationTests.claimOfANewApp)
        CASE WHEN j.kind IS NULL AND m.parent_id IS NOT NULL AND j.reason IN ('subscribedThread', 'allReplies')
             THEN EXISTS (SELECT 1 FROM digest_windows w WHERE w.app = \(app) AND w.opened_by = j.message_id AND w.uid = j.recipient OFFSET 0)
             ELSE false END AS opened_digest,
        \(Device.Target.recipientDevices(app: app)) AS devices
        """
    }
}

extension JobPayload {
    /// A job from a row of `columns` (in an extension, so that the memberwise initialiser stays).
    package init(row: PostgresRow) throws {
        self.init(id: try row.decode("id"),
                  attempt: try row.decode("attempt"),
                  app: try row.decode("app"),
                  recipient: try row.decode("recipient"),
                  createdAt: try row.decode("created_at"),
                  eventSource: try row.decode("event_source"),
                  eventID: try row.decode("event_id"),
                  eventType: try row.decode("event_type"),
                  reason: try row.decode("reason"),
                  devices: try Device.Target.list(json: try row.decode("devices")),
                  privacy: try row.decode("privacy"),
                  badge: try row.decode("badge"),
                  messageID: try row.decode("message_id"),
                  conversationID: try row.decode("conversation_id"),
                  receiverType: try row.decode("receiver_type"),
                  groupID: try row.decode("group_id"),
                  sender: try row.decode("sender"),
                  sentAt: try row.decode("sent_at"),
                  parentID: try row.decode("parent_id"),
                  text: try row.decode("text"),
                  lastError: try row.decode("last_error"),
                  excludeDevice: try row.decode("exclude_device"),
                  traceparent: try row.decode("traceparent"))
        if let subject = try row.decode("subject_id", as: String?.self), let reactor = try row.decode("reactor", as: String?.self) {
            reaction = Reaction(id: subject, reactor: reactor, emoji: try row.decode("reaction"))
        }
        let kind = JobKind(stored: try row.decode("job_kind", as: String?.self))
        if kind == .sync {
            sync = Sync(change: reason, conversationID: try row.decode("subject_id"), at: try row.decode("sync_at", as: Int64?.self) ?? 0,
                        by: try row.decode("sync_by"))
        }
        if let name = try row.decode("action", as: String?.self), let action = MemberAction(rawValue: name) {
            memberAction = MemberActionFacts(action: action, uid: try row.decode("action_uid"), actor: try row.decode("action_actor"),
                                             scope: try row.decode("action_scope"), at: try row.decode("action_at"))
        }
        if kind == .digest {
            digest = Digest(count: try row.decode("digest_count", as: Int?.self) ?? 0,
                            messageIDs: try Self.strings(row.decode("clear_ids")),
                            senders: try Self.strings(row.decode("digest_senders")))
        }
        opensDigest = try row.decode("opened_digest", as: Bool?.self) ?? false
        if kind == .update { updates = try row.decode("template_reason", as: String?.self) ?? "edited" }
        if let name = try row.decode("job_kind", as: String?.self), let kind = Removal.Kind(rawValue: name) {
            removal = Removal(kind: kind, collapseIds: try Self.strings(row.decode("clear_ids")))
        }
    }

    /// A job of a block from a row of `JobQueue.blockJobs`: the first job `first` of its claimed
    /// range with what is the job's own — every other field of a block's job is its block's
    /// (its message's event, facts and trace; attempt 1; no row-job fields).
    package init(block first: JobPayload, row: PostgresRow) throws {
        self = first
        source = first.id
        id = try row.decode("id")
        recipient = try row.decode("recipient")
        reason = try row.decode("reason")
        privacy = try row.decode("privacy")
        badge = try row.decode("badge")
        opensDigest = try row.decode("opened_digest")
        devices = try Device.Target.list(json: try row.decode("devices"))
    }
}
