import HeraldDomain
import Postgres
import JSON

extension Fanout {
    /// Routes again, for the users of `triggers`, the replies of their threads that were routed
    /// before a trigger that precedes them arrived (a late reply or mention that subscribes its
    /// user from an earlier time): each message is routed against the subscriptions as of its own
    /// time, whatever the order of delivery or the batching (SPEC §4). A job is added only where
    /// the subscription is what changes the decision. Delivered in order, the window after each
    /// trigger is empty, and this costs one index probe per trigger.
    package func catchUp(_ triggers: [(uid: String, thread: String, at: Int64)], excluding fresh: [String], appSettings: BatchSettings,
                 on connection: PostgresConnection) throws -> Int {
        guard let query = catchUpQuery(triggers, excluding: fresh) else { return 0 }
        return try catchUp(found: connection.query(query), appSettings: appSettings, on: connection)
    }

    /// The statement that finds what `catchUp` routes again (nil: no trigger), for a caller that
    /// sends it with others in one round trip and hands its rows to `catchUp(found:)`.
    package func catchUpQuery(_ triggers: [(uid: String, thread: String, at: Int64)], excluding fresh: [String]) -> SQL? {
        guard !triggers.isEmpty else { return nil }
        return """
            -- (the jobs the found messages have already are read by `catchUp(found:)`, only when
            -- there are any: delivered in order there are none, and a statement that reads them too
            -- cost a quarter of a millisecond a round to start, S1)
            WITH k AS (
                SELECT uid, thread_id, min(at) AS at FROM unnest(\(triggers.map(\.uid))::text[], \(triggers.map(\.thread))::text[], \(triggers.map(\.at))::bigint[]) AS k(uid, thread_id, at)
                 GROUP BY uid, thread_id
            ), c AS MATERIALIZED (
                SELECT k.uid, m.id, m.event_source, m.event_id, m.event_type, m.sender, m.group_id, m.user_a, m.user_b, m.sent_at,
                       m.category, m.text, m.mentions_all, m.quoted_sender, m.send_notification,
                       s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked,
                       EXISTS (SELECT 1 FROM mentions mn WHERE mn.app = \(app) AND mn.message_id = m.id AND mn.at = m.sent_at AND mn.uid = k.uid)
                           AS mentioned,
                       \(RecipientRow.columns(uid: "k.uid", app: app)),
                       m.parent_id
                  FROM k
                  -- each key's subscription by its whole key (OFFSET 0: a probe per key, never the
                  -- thread's subscriptions filtered per key, which stale statistics once chose:
                  -- 50 million rows filtered for one late reply of 10,000 users)
                  CROSS JOIN LATERAL (SELECT s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked FROM subscriptions s
                                       WHERE s.app = \(app) AND s.uid = k.uid AND s.thread_id = k.thread_id AND s.subscribed
                                      OFFSET 0) s
                  -- the thread's replies sent at or after the trigger, through messages_replies_by_time
                  CROSS JOIN LATERAL (SELECT * FROM messages m
                                       WHERE m.app = \(app) AND m.parent_id = k.thread_id AND m.sent_at >= k.at
                                         AND \(Visibility.live(app: app)) AND m.sender <> k.uid
                                         AND m.event_id IS NOT NULL AND m.id <> ALL (\(fresh)::text[])
                                      OFFSET 0) m
                 -- each a probe by its key (scalar subqueries: an [NOT] EXISTS became a join that read
                 -- the app's every thread, filtered by the keys, 175 ms a round of W1)
                 WHERE NOT coalesce((SELECT true FROM fanout_tasks ft
                                      WHERE ft.app = \(app) AND ft.event_source = m.event_source AND ft.event_id = m.event_id), false)
                   AND CASE WHEN m.group_id IS NULL THEN k.uid IN (m.user_a, m.user_b)
                            ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                            WHERE g.app = \(app) AND g.group_id = m.group_id AND g.uid = k.uid), false) END
            )
            SELECT c.* FROM c
            """
    }

    /// Routes again what `catchUpQuery` found.
    package func catchUp(found rows: PostgresRows, appSettings: BatchSettings, on connection: PostgresConnection) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let settings = try appSettings.get()
        let now = appSettings.appliedAt
        // the jobs the messages already have (a notification of the message, not a reaction's or
        // an update's that name it too): each message's blocks read once, through its key (OFFSET
        // 0: per message, not a join over every job of the app), rather than one look-up per
        // (user, message)
        var ids: [String] = []
        var seen: Set<[UInt8]> = []
        for row in rows {
            let id = try row.decode("id", as: String.self)
            if seen.insert(Array(id.utf8)).inserted { ids.append(id) }
        }
        var have: [[UInt8]: (readyID: Int64?, reason: String?)] = [:]
        for row in try connection.query("""
            SELECT DISTINCT ON (j.message_id, j.recipient) j.message_id, j.recipient,
                   CASE WHEN j.state = 'ready' THEN j.id END AS ready_id, j.reason
              FROM unnest(\(ids)::text[]) AS mm(id)
             CROSS JOIN LATERAL (SELECT * FROM jobs j WHERE j.app = \(app) AND j.message_id = mm.id AND j.kind IS NULL OFFSET 0) j
             ORDER BY j.message_id, j.recipient, j.block NULLS FIRST
            """) {
            let key = Array(try row.decode("message_id", as: String.self).utf8) + [0] + Array(try row.decode("recipient", as: String.self).utf8)
            have[key] = (try row.decode("ready_id", as: Int64?.self), try row.decode("reason", as: String?.self))
        }
        var jobs: [JobRow] = []
        var upgrades: [(id: Int64, reason: Routing.Reason)] = []
        for row in rows {
            let uid = try row.decode("uid", as: String.self)
            let message = try DomainEvent.MessageCreated(row: row)
            let unsubscribedAt = try row.decode("unsubscribed_at", as: Int64?.self)
            let subscription = try Routing.SubscriptionState(row: row, asOf: message.sentAt)
            guard subscription == .subscribed else { continue }
            let recipient = try RecipientRow(row, settings: settings)
            let mentioned = try row.decode("mentioned", as: Bool.self)
            func decide(_ state: Routing.SubscriptionState) -> Routing.Decision {
                var input = Self.input(message, recipient: uid, recipient, subscription: state, mentionedExplicitly: mentioned,
                                       settings: settings, now: now)
                // A message older than maxEventAgeSeconds now is not routed again: a late trigger
                // (itself older still: it subscribed from before the message) wakes nobody for it,
                // as its own event would not (SPEC §11.5).
                input.age = settings.age(of: message.sentAt, appliedAt: now)
                return Routing.decide(input)
            }
            // What the message's routing saw before this trigger was known, against what it sees now.
            guard case .notified(let reason) = decide(.subscribed).outcome else { continue }
            if let existing = have[Array(message.id.utf8) + [0] + Array(uid.utf8)], existing.reason != nil {
                // A job made without the subscription: a stronger reason (subscribedThread over
                // allReplies) while no worker has it yet.
                if let job = existing.readyID, let old = existing.reason.flatMap(Routing.Reason.init(rawValue:)),
                   reason < old {
                    upgrades.append((job, reason))
                }
                continue
            }
            guard !decide(unsubscribedAt == nil ? .none : .unsubscribed).notified else { continue }
            let event = IncomingEvent(source: try row.decode("event_source"), id: try row.decode("event_id"), type: try row.decode("event_type"), event: .noEffect)
            jobs.append((Created(event: event, message: message), uid, reason, Self.privacy(settings: settings, preferences: recipient.preferences)))
        }
        if !upgrades.isEmpty {
            try connection.query("""
                UPDATE job_rows j SET reason = x.reason FROM unnest(\(upgrades.map(\.id))::bigint[], \(upgrades.map(\.reason.rawValue))::text[]) AS x(id, reason)
                 WHERE j.app = \(app) AND j.id = x.id AND j.state = 'ready'
                """)
            // a block's job, while unclaimed: one position at a time (rare: a late trigger)
            for upgrade in upgrades {
                let (block, position) = JobBlocks.place(upgrade.id)
                try connection.query("""
                    UPDATE job_blocks SET reasons[\(position)::int + 1] = \(upgrade.reason.code)::smallint
                     WHERE app = \(app) AND id = \(block) AND claimed <= \(position)::int AND \(position)::int < stop
                    """)
            }
        }
        return try insert(jobs, on: connection, mayExist: true)
    }
}
