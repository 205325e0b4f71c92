import HeraldDomain
import Postgres

/// SPEC §11.1–11.2, reactions: the `reactions` table holds one row per reaction id whatever the
/// order of its events; a `reaction.added` seen for the first time, with no removal recorded,
/// notifies the conversation's members the decision lets through (`Routing.decide(_:
/// ReactionInput)`): one `reaction` job per (reaction, recipient). A `reaction.removed` cancels
/// that reaction's unclaimed jobs and retracts the claimed ones (`retract`, reason
/// `reactionRemoved`). Reactions never subscribe anyone and never change unread counts.
///
/// Runs in the ingest transaction under the reacted message's thread lock (`IngestStore.lockSet`),
/// so a deletion of the message or a removal of the reaction is wholly before or after it. Groups
/// above `largeGroupThreshold` get a fan-out task (`FanoutWorker`), worked with `produce`.
package enum ReactionJobs {
    package struct Item {
        package let event: IncomingEvent
        package let reaction: DomainEvent.Reaction
    }

    /// What `store` found: the reactions added for the first time (and still live) and those
    /// removed for the first time, which `make` makes the jobs of.
    package struct Stored {
        package var added: [Item] = []
        package var removed: [Item] = []

        package init() {}
    }

    /// Stores the batch's reaction events (the ingest round's first step).
    package static func store(app: String, _ items: [Item], on connection: PostgresConnection) throws -> Stored {
        guard !items.isEmpty else { return Stored() }
        // One row per reaction id (keys compare as bytes): the batch's first reaction.added, its
        // earliest reaction.removed.
        var order: [[UInt8]] = []
        var merged: [[UInt8]: (first: DomainEvent.Reaction, added: Item?, removed: Item?)] = [:]
        for item in items {
            let key = Array(item.reaction.id.utf8)
            var entry = merged[key] ?? (item.reaction, nil, nil)
            if merged[key] == nil { order.append(key) }
            if item.reaction.added {
                if entry.added == nil { entry.added = item }
            } else if entry.removed.map({ $0.reaction.at > item.reaction.at }) ?? true {
                entry.removed = item
            }
            merged[key] = entry
        }
        let rows = order.map { merged[$0]! }
        // The facts of a reaction come from its reaction.added when the batch has one.
        let facts = rows.map { $0.added?.reaction ?? $0.first }
        let result = try connection.query("""
            WITH input AS (
                SELECT * FROM unnest(\(facts.map(\.id))::text[], \(facts.map(\.messageID))::text[], \(facts.map(\.reactor))::text[], \(facts.map(\.reaction))::text[], \(facts.map(\.conversation.id))::text[], \(facts.map(\.conversation.receiverType))::text[], \(facts.map(\.conversation.groupID))::text[],
                                     \(facts.map(\.conversation.userA))::text[], \(facts.map(\.conversation.userB))::text[], \(facts.map(\.messageSender))::text[], \(facts.map(\.parentID))::text[], \(rows.map { $0.added?.reaction.at })::bigint[], \(rows.map { $0.removed?.reaction.at })::bigint[],
                                     \(rows.map { $0.added?.event.source })::text[], \(rows.map { $0.added?.event.id })::text[])
                    AS x(id, message_id, reactor, reaction, conversation_id, receiver_type, group_id, user_a, user_b,
                         message_sender, parent_id, added_at, removed_at, added_source, added_event_id)
            ),
            -- MATERIALIZED: read before `up` writes (Citus runs an inlined CTE after the insert)
            old AS MATERIALIZED (SELECT r.id, r.added_at, r.removed_at FROM input i
                     CROSS JOIN LATERAL (SELECT * FROM reactions r WHERE r.app = \(app) AND r.id = i.id OFFSET 0) r),
            up AS (
                INSERT INTO reactions AS r (app, id, message_id, reactor, reaction, conversation_id, receiver_type, group_id,
                                            user_a, user_b, message_sender, parent_id, added_at, removed_at, added_source,
                                            added_event_id)
                SELECT \(app), i.* FROM input i
                 ORDER BY i.id COLLATE "C"
                ON CONFLICT (app, id) DO UPDATE SET
                    added_at = coalesce(r.added_at, EXCLUDED.added_at),
                    added_source = CASE WHEN r.added_at IS NULL THEN EXCLUDED.added_source ELSE r.added_source END,
                    added_event_id = CASE WHEN r.added_at IS NULL THEN EXCLUDED.added_event_id ELSE r.added_event_id END,
                    removed_at = least(r.removed_at, EXCLUDED.removed_at),
                    message_sender = coalesce(r.message_sender, EXCLUDED.message_sender),
                    parent_id = coalesce(r.parent_id, EXCLUDED.parent_id)
                RETURNING r.id, r.removed_at
            )
            SELECT i.id, o.added_at IS NULL AND i.added_at IS NOT NULL AS added_fresh,
                   o.removed_at IS NULL AND i.removed_at IS NOT NULL AS removed_fresh,
                   u.removed_at IS NULL AS live
              FROM input i JOIN up u ON u.id = i.id LEFT JOIN old o ON o.id = i.id
            """)
        var stored = Stored()
        for row in result {
            guard let entry = merged[Array(try row.decode("id", as: String.self).utf8)] else { continue }
            if try row.decode("added_fresh", as: Bool.self), try row.decode("live", as: Bool.self), let item = entry.added {
                stored.added.append(item)
            }
            if try row.decode("removed_fresh", as: Bool.self), let item = entry.removed { stored.removed.append(item) }
        }
        return stored
    }

    /// Makes the jobs of what `store` found (the round's last step, after the batch's messages
    /// and deletions are stored); returns how many were made.
    package static func make(app: String, _ stored: Stored, appSettings: BatchSettings, on connection: PostgresConnection) throws -> Int {
        let (added, removed) = (stored.added, stored.removed)
        guard !added.isEmpty || !removed.isEmpty else { return 0 }
        let settings = try appSettings.get()
        let now = appSettings.appliedAt
        var produced = try retract(app: app, removed, settings: settings, now: now, on: connection)
        // A replayed backlog wakes nobody (SPEC §11.5, `Routing.EventAge`): not even read.
        let due = added.filter { !settings.age(of: $0.reaction.at, appliedAt: now).isStale }
        guard !due.isEmpty else { return produced }
        let large = try EventJobs.largeGroups(app: app, due.compactMap(\.reaction.conversation.groupID),
                                              threshold: settings.largeGroupThreshold, on: connection)
        func isLarge(_ item: Item) -> Bool { item.reaction.conversation.groupID.map(large.contains) ?? false }
        try EventJobs.enqueue(app: app, due.filter(isLarge).map {
            EventJobs.Task(event: $0.event, messageID: $0.reaction.messageID, subjectID: $0.reaction.id)
        }, on: connection)
        produced += try produce(app: app, due.filter { !isLarge($0) }.map { ($0.event, $0.reaction.id) }, settings: settings, now: now,
                                after: nil, limit: nil, on: connection).produced
        return produced
    }

    /// Cancels the unclaimed jobs of removed reactions and retracts the claimed ones (not for a
    /// stale removal).
    private static func retract(app: String, _ removed: [Item], settings: AppSettings, now: Int64,
                                on connection: PostgresConnection) throws -> Int {
        guard !removed.isEmpty else { return 0 }
        try connection.query("""
            UPDATE job_rows j SET state = 'cancelled', updated_at = herald_now_ms()
              FROM unnest(\(removed.map(\.reaction.id))::text[]) AS x(id)
             CROSS JOIN LATERAL (SELECT * FROM reactions r WHERE r.app = \(app) AND r.id = x.id OFFSET 0) r
             WHERE j.app = \(app) AND j.message_id = r.message_id AND j.subject_id = r.id AND j.kind = 'reaction' AND j.state = 'ready'
            """)
        let due = removed.filter { !settings.age(of: $0.reaction.at, appliedAt: now).isStale }
        guard !due.isEmpty else { return 0 }
        // The rows first (MATERIALIZED), then the insert: Citus 13 plans an INSERT … SELECT over
        // a UNION (the `jobs` view is one) only from a CTE's result.
        return try connection.query("""
            WITH made AS MATERIALIZED (
            SELECT DISTINCT ON (r.id, j.recipient) r.message_id, r.id, j.recipient, x.source, x.event_id
              FROM unnest(\(due.map(\.reaction.id))::text[], \(due.map(\.event.source))::text[], \(due.map(\.event.id))::text[]) AS x(id, source, event_id)
             CROSS JOIN LATERAL (SELECT * FROM reactions r WHERE r.app = \(app) AND r.id = x.id OFFSET 0) r
              JOIN jobs j ON j.app = \(app) AND j.message_id = r.message_id AND j.subject_id = r.id AND j.kind = 'reaction'
                         AND j.state IN ('leased', 'acked')
             ORDER BY r.id, j.recipient)
            INSERT INTO job_rows (app, message_id, subject_id, recipient, event_source, event_id, event_type, reason, kind, clear_ids)
            SELECT \(app), made.message_id, made.id, made.recipient, made.source, made.event_id, 'reaction.removed', 'reactionRemoved',
                   'retract', ARRAY[made.id]
              FROM made
            ON CONFLICT DO NOTHING
            """).affectedRows
    }

    /// Decides and inserts the jobs of the live reactions `items` (their reaction.added event and
    /// reaction id) for their candidates — all of them, or for one reaction the next `limit` group
    /// members after the uid `after` (a fan-out chunk). Returns the last member uid looked at (nil
    /// when there was none) and the count of jobs inserted.
    ///
    /// A user who stored no preferences has the app's: unless the app's default is
    /// `SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES`, only the message's author can be notified among
    /// them, so the query skips the others.
    package static func produce(app: String, _ items: [(event: IncomingEvent, reactionID: String)], settings: AppSettings, now: Int64,
                        after: String?, limit: Int?, on connection: PostgresConnection) throws -> (last: String?, produced: Int) {
        guard !items.isEmpty else { return (nil, 0) }
        let defaults = EffectivePreferences(app: settings)
        let rows = try connection.query("""
            WITH r AS (
                SELECT x.n, r.id, r.message_id, r.reactor, r.group_id, r.user_a, r.user_b, r.added_at,
                       coalesce(m.sender, r.message_sender) AS author, coalesce(m.parent_id, r.parent_id) AS parent_id
                  FROM unnest(\(items.map(\.reactionID))::text[]) WITH ORDINALITY AS x(id, n)
                  -- one reaction at a time through its key (OFFSET 0: a young table's statistics
                  -- would otherwise have it scanned whole under the generic plan)
                  CROSS JOIN LATERAL (SELECT * FROM reactions r WHERE r.app = \(app) AND r.id = x.id OFFSET 0) r
                  LEFT JOIN messages m ON m.app = \(app) AND m.id = r.message_id
                 -- removed meanwhile, or on a message, thread or group known to be deleted: nobody
                 WHERE r.removed_at IS NULL AND m.deleted_at IS NULL
                   AND NOT EXISTS (SELECT 1 FROM threads t WHERE t.app = \(app) AND t.deleted_at IS NOT NULL
                                      AND t.parent_id = coalesce(m.parent_id, r.parent_id, r.message_id))
                   AND NOT EXISTS (SELECT 1 FROM deleted_groups d WHERE d.app = \(app) AND d.group_id = r.group_id)
            ),
            candidates AS (
                SELECT r.n, g.uid, g.joined_at, r.author, r.parent_id, r.group_id, r.reactor, r.added_at, r.message_id
                  FROM r CROSS JOIN LATERAL (
                        SELECT g.uid, g.joined_at FROM group_members g
                         WHERE \(Fanout.groupWalk("g", group: "r.group_id", after: "\(after)", app: "\(app)")) AND herald_member_now(g.joined_at, g.removed_at)
                           AND g.uid <> r.reactor
                           AND (\(defaults.group.reactions == .allMessages)::boolean OR g.uid = r.author
                                OR EXISTS (SELECT 1 FROM user_preferences up WHERE up.app = \(app) AND up.uid = g.uid))
                         ORDER BY g.uid COLLATE "C" LIMIT \(limit)) g
                 WHERE r.group_id IS NOT NULL
                UNION ALL
                SELECT r.n, CASE WHEN r.user_a = r.reactor THEN r.user_b ELSE r.user_a END, NULL, r.author, r.parent_id, NULL,
                       r.reactor, r.added_at, r.message_id
                  FROM r WHERE r.group_id IS NULL AND r.user_a <> r.user_b
            )
            SELECT c.n, c.uid, c.message_id, c.group_id IS NULL AS one_on_one, coalesce(c.uid = c.author, false) AS wrote, c.parent_id IS NOT NULL AS on_reply,
                   -- access at the reaction's time: a current member whose latest evidence is no
                   -- later than it was one then; otherwise the history decides
                   CASE WHEN c.group_id IS NULL OR c.added_at >= c.joined_at THEN true
                        ELSE herald_member_at(\(app), c.group_id, c.uid, c.added_at) END AS has_access,
                   c.added_at, s.subscribed, s.since, s.manual_at, s.unsubscribed_at,
                   up.preferences::text AS preferences,
                   (SELECT mu.until FROM user_mutes mu
                     WHERE mu.app = \(app) AND mu.uid = c.uid
                       AND mu.conversation_type = CASE WHEN c.group_id IS NULL THEN 'oneOnOne' ELSE 'group' END
                       AND mu.conversation_id = coalesce(c.group_id, c.reactor)) AS muted_until
              FROM candidates c
              LEFT JOIN subscriptions s ON c.parent_id IS NOT NULL AND s.app = \(app) AND s.uid = c.uid AND s.thread_id = c.parent_id
              LEFT JOIN user_preferences up ON up.app = \(app) AND up.uid = c.uid
            """)
        guard !rows.isEmpty else { return (nil, 0) }
        var cache = EventJobs.PreferenceCache(settings: settings, now: now)
        var last: String?
        var jobs: [EventJobs.Row] = []
        for row in rows {
            let item = items[try row.decode("n", as: Int.self) - 1]
            let uid = try row.decode("uid", as: String.self)
            last = EventJobs.later(uid, than: last)
            let text = try row.decode("preferences", as: String?.self)
            let type: Routing.ConversationType = try row.decode("one_on_one", as: Bool.self) ? .oneOnOne : .group
            var input = Routing.ReactionInput()
            input.common = cache.common(text, type: type, mutedUntil: try row.decode("muted_until"))
            input.common.hasAccess = try row.decode("has_access")
            let preferences = cache.effective(text)
            input.reactions = preferences.conversation(type).reactions
            input.wroteMessage = try row.decode("wrote")
            input.onReply = try row.decode("on_reply")
            input.subscription = try Routing.SubscriptionState(row: row, judgedAt: try row.decode("added_at"))
            guard case .notified(let reason) = Routing.decide(input).outcome else { continue }
            jobs.append(EventJobs.Row(event: item.event, messageID: try row.decode("message_id", as: String.self), subjectID: item.reactionID,
                                      recipient: uid, kind: .reaction, reason: reason.rawValue,
                                      privacy: Fanout.privacy(settings: settings, preferences: preferences)))
        }
        return (last, try EventJobs.insert(app: app, jobs, on: connection))
    }
}
