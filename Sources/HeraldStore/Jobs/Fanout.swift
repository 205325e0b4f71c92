import HeraldDomain
import Postgres
import JSON

/// Produces the push jobs of newly created messages in the ingest transaction (SPEC §8–9):
/// candidates and everything the decision needs come from one set-based query, the decision is
/// `Routing.decide`, and the jobs go in with one insert that ignores (event, recipient) pairs
/// that already have a job.
/// A job to insert: who gets it, for which message's event, why, and whether the privacy
/// template applies.
package typealias JobRow = (created: Fanout.Created, recipient: String, reason: Routing.Reason, privacy: Bool)

package struct Fanout {
    package let app: String
    /// Whether a job may already exist for an (event, recipient) being inserted: a large-group
    /// chunk redone after a crash, a catch-up. The jobs of messages new in this transaction cannot
    /// (their event is new), and a plain insert is a third cheaper than `ON CONFLICT DO NOTHING`;
    /// should one conflict all the same, the batch is run again with this set (IngestStore).
    package var jobsMayExist = true

    package init(app: String, jobsMayExist: Bool = true) {
        self.app = app
        self.jobsMayExist = jobsMayExist
    }

    /// A class, not a struct: each of a message's jobs (`JobRow`) refers to it, and a struct of
    /// two events' strings copied per job retained each of them (S2: 1,500 copies a round).
    package final class Created: Sendable {
        package let event: IncomingEvent
        package let message: DomainEvent.MessageCreated

        package init(event: IncomingEvent, message: DomainEvent.MessageCreated) {
            self.event = event
            self.message = message
        }

        /// The event is the message's own creation (recorded on its row), not an edit.
        package var ownEvent: Bool { event.type == "message.created" }
    }

    /// message.edited notifies only the users it newly mentions (SPEC §8.1): reason mention, kind
    /// as the message's, judged now for the edit's event.
    package func runEdits(_ edits: [(event: IncomingEvent, edit: DomainEvent.MessageEdited)], appSettings: BatchSettings,
                  on connection: PostgresConnection) throws -> Int {
        guard edits.contains(where: { !($0.edit.mentions ?? []).isEmpty }) else { return 0 }
        let settings = try appSettings.get()
        let now = appSettings.appliedAt
        // a stale edit notifies nobody (`Routing.EventAge`): its recipients are not read
        let withMentions = edits.filter { !($0.edit.mentions ?? []).isEmpty && !settings.age(of: $0.edit.editedAt, appliedAt: now).isStale }
        guard !withMentions.isEmpty else { return 0 }
        let rows = try connection.query("""
            SELECT x.n, mn.uid, m.category, m.send_notification, m.text,
                   s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked,
                   \(RecipientRow.columns(uid: "mn.uid", app: app))
              FROM unnest(\(withMentions.map(\.edit.id))::text[], \(withMentions.map(\.edit.editedAt))::bigint[]) WITH ORDINALITY AS x(id, at, n)
              JOIN messages m ON m.app = \(app) AND m.id = x.id AND \(Visibility.undeleted(app: app))
              JOIN mentions mn ON mn.app = \(app) AND mn.message_id = x.id AND mn.at = x.at
              LEFT JOIN subscriptions s ON s.app = \(app) AND s.uid = mn.uid AND s.thread_id = coalesce(m.parent_id, m.id)
             WHERE mn.uid <> m.sender
               AND NOT coalesce((SELECT mn.uid = ANY (v.mentions) FROM message_versions v
                                  WHERE v.app = \(app) AND v.message_id = x.id AND v.at < x.at AND v.mentions IS NOT NULL
                                  ORDER BY v.at DESC LIMIT 1), false)
               AND CASE WHEN m.group_id IS NULL THEN mn.uid IN (m.user_a, m.user_b)
                        ELSE coalesce((SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                                        WHERE g.app = \(app) AND g.group_id = m.group_id AND g.uid = mn.uid), false) END
            """)
        var jobs: [JobRow] = []
        for row in rows {
            let item = withMentions[try row.decode("n", as: Int.self) - 1]
            let uid = try row.decode("uid", as: String.self)
            let edit = item.edit
            let message = DomainEvent.MessageCreated(
                id: edit.id, sender: edit.sender, conversation: edit.conversation, parentID: edit.parentID, parentSender: nil,
                sentAt: edit.editedAt, category: try row.decode("category", as: String?.self) ?? "message", type: nil,
                text: try edit.text ?? row.decode("text", as: String?.self), mentions: edit.mentions ?? [], mentionsAll: false,
                quotedMessageID: nil, quotedSender: nil, sendNotification: try row.decode("send_notification", as: Bool?.self))
            let recipient = try RecipientRow(row, settings: settings)
            let subscription = try Routing.SubscriptionState(row: row, asOf: edit.editedAt)
            var input = Self.input(message, recipient: uid, recipient, subscription: subscription, mentionedExplicitly: true,
                                   settings: settings, now: now)
            input.isEdit = true
            let decision = Routing.decide(input)
            guard case .notified(let reason) = decision.outcome else { continue }
            jobs.append((Created(event: item.event, message: message), uid, reason,
                         Self.privacy(settings: settings, preferences: recipient.preferences)))
        }
        return try insert(jobs, on: connection)
    }

    package static func privacy(settings: AppSettings, preferences: EffectivePreferences) -> Bool {
        switch settings.privacyTemplateMode {
        case .privacy: return true
        case .default: return false
        case .userChoice: return preferences.usePrivacyTemplate
        }
    }

    /// Jobs of newly created messages: in this transaction for groups up to the app's
    /// `largeGroupThreshold`; above it, a fan-out task for the background workers.
    /// `alongside`: statements sent in the same round trip as the routing query, after it; their
    /// rows are returned in `found`.
    package func run(_ created: [Created], appSettings: BatchSettings, alongside: [SQL] = [],
                     on connection: PostgresConnection) throws -> (produced: Int, found: [PostgresRows]) {
        let settings = try appSettings.get()
        // A replayed backlog changes state but wakes nobody: stale messages get no job and no task
        // (`Routing.EventAge`: decide would skip each recipient, who are not read).
        let now = appSettings.appliedAt
        let created = created.filter { !settings.age(of: $0.message.sentAt, appliedAt: now).isStale }
        guard !created.isEmpty else { return (0, try connection.pipeline(alongside)) }
        // The groups above the threshold are found by the routing query itself, which reads none
        // of their members: their messages go to fan-out tasks.
        let routed = try produce(created, settings: settings, now: now, after: nil, limit: nil, largeGroupThreshold: settings.largeGroupThreshold,
                                 alongside: alongside, on: connection)
        let large = Set(routed.large.map { Array($0.utf8) })
        try EventJobs.enqueue(app: app, created.filter { large.contains(Array($0.message.id.utf8)) }.map {
            EventJobs.Task(event: $0.event, messageID: $0.message.id, subjectID: nil)
        }, on: connection)
        return (routed.produced, routed.found)
    }

    /// Decides and inserts the jobs of `created` for their candidates — all of them, or for one
    /// message the next `limit` group members after the uid `after` (a fan-out chunk). Returns the
    /// last member uid looked at (nil when there was none) and the count of jobs inserted.
    ///
    /// With `largeGroupThreshold` (ingest), a message whose group has more members than that is
    /// not routed: its id is returned in `large` (the caller makes it a fan-out task), and none of
    /// the group's members is read. `alongside`: statements sent in the same round trip, after the
    /// routing query; their rows are returned in `found`.
    package func produce(_ created: [Created], settings: AppSettings, now: Int64, after: String?, limit: Int?, largeGroupThreshold: Int? = nil,
                         alongside: [SQL] = [], on connection: PostgresConnection)
        throws -> (last: String?, produced: Int, large: [String], found: [PostgresRows]) {
        guard !created.isEmpty else { return (nil, 0, [], try connection.pipeline(alongside)) }
        var cache = EventJobs.PreferenceCache(settings: settings, now: now)
        // The group messages whose every member is read: those a member with no state of their own
        // would be notified of (no subscription, level, mention, quote or stored preferences —
        // `Routing.decide` on such a member, the app's defaults), and every message of a fan-out
        // chunk (its walk counts members). For the others only the members that have such state
        // can be notified (a mute or a digest window only holds back), and only they are read:
        // with replies at SUBSCRIBE_TO_SUBSCRIBED_THREADS a reply reads its thread's subscribers,
        // not its group (W1: 50 members probed three times each per reply).
        let everyone = created.compactMap { item -> String? in
            guard limit == nil, after == nil else { return item.message.id }
            guard item.message.conversation.groupID != nil else { return nil }
            let blank = Self.input(item.message, recipient: "", subscription: .none, mentionedExplicitly: false,
                                   preferences: cache.effective(nil), settings: settings, mutedUntil: nil, now: cache.now,
                                   resolved: cache.resolve(nil, type: .group))
            return Routing.decide(blank).notified ? item.message.id : nil
        }
        // A set's keys and its members: when every group message reads every member (fan-out
        // chunks, replies at SUBSCRIBE_TO_ALL), the walk alone — the statement as it was before
        // members with state were read apart, so that those paths plan and run as they did.
        let allMembers = Set(created.lazy.filter { $0.message.conversation.groupID != nil }.map(\.message.id)).isSubset(of: Set(everyone))
        let walk: SQL = """
            SELECT g.uid FROM group_members g
             WHERE \(Fanout.groupWalk("g", group: "k.group_id", after: "\(after)", app: "\(app)")) AND herald_member_now(g.joined_at, g.removed_at)
             ORDER BY g.uid COLLATE "C" LIMIT \(limit)
            """
        let keys: SQL, members: SQL
        if allMembers {
            keys = """
                SELECT DISTINCT m.set_key, m.group_id, coalesce(m.parent_id, m.id) AS thread_id, m.conversation_id
                  FROM m WHERE m.group_id IS NOT NULL
                """
            members = "(\(walk)) g"
        } else {
            keys = """
                SELECT m.set_key, m.group_id, coalesce(m.parent_id, m.id) AS thread_id, m.conversation_id,
                       bool_or(m.id = ANY (\(everyone)::text[])) AS everyone,
                       array_agg(m.id) AS ids, array_agg(m.sent_at) AS sent, array_agg(m.quoted_sender) AS quoted
                  FROM m WHERE m.group_id IS NOT NULL GROUP BY 1, 2, 3, 4
                """
            // every member (a one-time filter: read only when the set needs them all) or only those
            // with state of their own: the thread's subscription rows, the conversation's levels,
            // the mentioned and quoted, the members with stored preferences (the one probe still
            // made per member), each still a member now
            members = """
                ((SELECT w.uid FROM (\(walk)) w WHERE k.everyone)
                 UNION ALL
                 (SELECT c.uid FROM (SELECT s.uid FROM subscriptions s
                                      WHERE NOT k.everyone AND s.app = \(app) AND s.thread_id = k.thread_id
                                     UNION
                                     SELECT l.uid FROM conversation_levels l
                                      WHERE NOT k.everyone AND l.app = \(app) AND l.conversation_id = k.conversation_id
                                     UNION
                                     SELECT mn.uid FROM unnest(k.ids, k.sent) AS i(id, at)
                                      CROSS JOIN LATERAL (SELECT mn.uid FROM mentions mn
                                                           WHERE mn.app = \(app) AND mn.message_id = i.id AND mn.at = i.at OFFSET 0) mn
                                      WHERE NOT k.everyone
                                     UNION
                                     SELECT q.uid FROM unnest(k.quoted) AS q(uid) WHERE NOT k.everyone AND q.uid IS NOT NULL
                                     UNION
                                     SELECT g.uid FROM group_members g
                                      WHERE NOT k.everyone AND \(Fanout.groupWalk("g", group: "k.group_id", after: "NULL", app: "\(app)"))
                                        AND EXISTS (SELECT FROM user_preferences up WHERE up.app = \(app) AND up.uid = g.uid)) c
                   WHERE (SELECT herald_member_now(g.joined_at, g.removed_at) FROM group_members g
                           WHERE g.app = \(app) AND g.group_id = k.group_id AND g.uid = c.uid)
                   ORDER BY c.uid COLLATE "C")) g
                """
        }
        let answers = try connection.pipeline(["""
            WITH every AS (
                -- each message with its set: the members of its group in its thread, or its peer
                SELECT m.*, CASE WHEN m.group_id IS NULL THEN m.id ELSE m.group_id || chr(31) || coalesce(m.parent_id, m.id) END AS set_key
                  FROM unnest(\(created.map(\.message.id))::text[]) AS x(id)
                  -- one message at a time through its key, and its thread through its key; a
                  -- deleted thread or group notifies nobody
                  CROSS JOIN LATERAL (SELECT * FROM messages m
                                       WHERE m.app = \(app) AND m.id = x.id AND \(Visibility.live(app: app))
                                      OFFSET 0) m
            ),
            -- the groups with more members than the threshold (counted up to one past it)
            large AS MATERIALIZED (
                SELECT k.group_id FROM (SELECT DISTINCT e.group_id FROM every e WHERE e.group_id IS NOT NULL AND \(largeGroupThreshold)::int IS NOT NULL) k
                 WHERE \(EventJobs.isLarge(group: "k.group_id", threshold: "\(largeGroupThreshold)", app: app))
            ),
            m AS (SELECT * FROM every e WHERE e.group_id IS NULL OR e.group_id NOT IN (SELECT l.group_id FROM large l)),
            -- Herald's time of each message (SPEC §17's T): when its event was applied
            -- (each through its key: a join could scan the app's events)
            t AS MATERIALIZED (
                SELECT m.id, m.parent_id,
                       coalesce((SELECT e.received_at FROM events e WHERE e.app = \(app) AND e.source = m.event_source AND e.id = m.event_id),
                                herald_now_ms()) AS herald_at
                  FROM m
            ),
            -- the recipients' latest digest windows in the replies' threads that were still open at
            -- the earliest of those times (SPEC §17), one range scan of each thread's windows into
            -- one map, as the levels (OFFSET 0: by the thread's key, never a scan of the app's)
            windows AS MATERIALIZED (
                SELECT jsonb_object_agg(w.thread_id || chr(31) || w.uid, w.opened_at || ' ' || w.ends_at) AS map
                  FROM (SELECT DISTINCT t.parent_id FROM t WHERE t.parent_id IS NOT NULL) k
                 CROSS JOIN LATERAL (SELECT DISTINCT ON (w.uid) w.thread_id, w.uid, w.opened_at, w.ends_at FROM digest_windows w
                                      WHERE w.app = \(app) AND w.thread_id = k.parent_id
                                        AND w.ends_at > (SELECT min(t.herald_at) FROM t)
                                        AND w.uid COLLATE "C" > coalesce(\(after)::text, '') COLLATE "C"
                                      ORDER BY w.uid, w.ends_at DESC OFFSET 0) w
            ),
            -- the levels of the messages' conversations (SPEC §18), read once for the whole set of
            -- recipients (one range scan of conversation_levels_by_conversation) into one map that
            -- each recipient looks up in memory: no index probe per recipient, and no join the
            -- planner could turn into a scan of the levels per recipient (W1: 2.6 times slower)
            levels AS MATERIALIZED (
                SELECT jsonb_object_agg(l.conversation_id || chr(31) || l.uid, l.level) AS map FROM conversation_levels l
                 WHERE l.app = \(app) AND l.conversation_id IN (SELECT m.conversation_id FROM m)
                   AND l.uid COLLATE "C" > coalesce(\(after)::text, '') COLLATE "C"
            ),
            -- a group's members and their state in a thread, read once per (group, thread) however
            -- many of the messages share it, each member's rows through their keys (OFFSET 0), so no
            -- plan made from stale statistics can compare every candidate with every subscription
            -- (S2 on fresh tables: 47 ms a round), and kept as parallel arrays: one row per set.
            -- The sender is among them (a fan-out chunk's LIMIT counts every member); Swift skips it.
            sets AS MATERIALIZED (
                SELECT k.set_key, x.* FROM (\(keys)) k
                 CROSS JOIN LATERAL (
                    SELECT array_agg(g.uid) AS uids, array_agg(s.subscribed) AS subscribed, array_agg(s.since) AS since,
                           array_agg(s.manual_at) AS manual_at, array_agg(s.unsubscribed_at) AS unsubscribed_at,
                           array_agg(s.tracked) AS tracked, array_agg(up.preferences::text) AS preferences,
                           array_agg(mu.until) AS muted_until,
                           array_agg((SELECT wn.map ->> (k.thread_id || chr(31) || g.uid) FROM windows wn)) AS digest_window,
                           array_agg((SELECT lv.map ->> (k.conversation_id || chr(31) || g.uid) FROM levels lv)) AS level
                      FROM \(members)
                      LEFT JOIN LATERAL (SELECT * FROM subscriptions s
                                          WHERE s.app = \(app) AND s.uid = g.uid AND s.thread_id = k.thread_id OFFSET 0) s ON true
                      LEFT JOIN LATERAL (SELECT * FROM user_preferences up WHERE up.app = \(app) AND up.uid = g.uid OFFSET 0) up ON true
                      LEFT JOIN LATERAL (\(Fanout.mutedUntilOf(uid: "g.uid", group: "k.group_id", other: "NULL", app: "\(app)")) OFFSET 0) mu(until) ON true
                 ) x
            ),
            -- the peer of each one-on-one message, a set of one
            one AS MATERIALIZED (
                SELECT m.set_key, o.uid, s.subscribed, s.since, s.manual_at, s.unsubscribed_at, s.tracked, up.preferences::text AS preferences,
                       \(Fanout.mutedUntilOf(uid: "o.uid", group: "NULL", other: "m.sender", app: "\(app)")) AS muted_until,
                       (SELECT wn.map ->> (coalesce(m.parent_id, m.id) || chr(31) || o.uid) FROM windows wn) AS digest_window,
                       (SELECT lv.map ->> (m.conversation_id || chr(31) || o.uid) FROM levels lv) AS level
                  FROM m CROSS JOIN LATERAL (SELECT CASE WHEN m.user_a = m.sender THEN m.user_b ELSE m.user_a END AS uid) o
                  LEFT JOIN LATERAL (SELECT * FROM subscriptions s
                                      WHERE s.app = \(app) AND s.uid = o.uid AND s.thread_id = coalesce(m.parent_id, m.id) OFFSET 0) s ON true
                  LEFT JOIN LATERAL (SELECT * FROM user_preferences up WHERE up.app = \(app) AND up.uid = o.uid OFFSET 0) up ON true
                 WHERE m.group_id IS NULL AND m.user_a <> m.user_b
            )
            -- Four kinds of rows, so that what several messages share is read and sent once: 'g' a
            -- member of a group's set and 'o' the peer of a one-on-one message, with their state;
            -- 'x' a message and its set; 'n' a user a message mentions.
            SELECT 'g' AS kind, sets.set_key, NULL AS message_id, NULL::bigint AS herald_at, u.*
              FROM sets CROSS JOIN LATERAL unnest(sets.uids, sets.subscribed, sets.since, sets.manual_at, sets.unsubscribed_at, sets.tracked,
                                                  sets.preferences, sets.muted_until, sets.digest_window, sets.level)
                   AS u(uid, subscribed, since, manual_at, unsubscribed_at, tracked, preferences, muted_until, digest_window, level)
            UNION ALL
            SELECT 'o', one.set_key, NULL, NULL, one.uid, one.subscribed, one.since, one.manual_at, one.unsubscribed_at, one.tracked,
                   one.preferences, one.muted_until, one.digest_window, one.level
              FROM one
            UNION ALL
            SELECT 'x', m.set_key, m.id, (SELECT t.herald_at FROM t WHERE t.id = m.id), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
              FROM m
            UNION ALL
            SELECT 'n', NULL, m.id, NULL, mn.uid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
              FROM m CROSS JOIN LATERAL (SELECT mn.uid FROM mentions mn WHERE mn.app = \(app) AND mn.message_id = m.id AND mn.at = m.sent_at OFFSET 0) mn
            UNION ALL
            -- 'l' a message of a large group
            SELECT 'l', NULL, e.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
              FROM every e WHERE e.group_id IN (SELECT l.group_id FROM large l)
            """] + alongside)
        let rows = answers[0], found = Array(answers.dropFirst())
        guard !rows.isEmpty else { return (nil, 0, [], found) }
        var large: [String] = []
        /// A member of a set, decoded once however many of the messages it hears.
        struct Member {
            package let uid: String
            package let subscribed: Bool?, since: Int64?, manualAt: Int64?, unsubscribedAt: Int64?, tracked: Bool
            package let preferences: EffectivePreferences, resolved: (Routing.Preferences, LocalTime)
            package let mutedUntil: Int64?, digestWindow: String?, level: Routing.ConversationLevel?
        }
        var sets: [String: [Member]] = [:]
        var messages: [String: (set: String, heraldAt: Int64?)] = [:]
        var mentioned: [String: Set<String>] = [:]   // by message
        for row in rows {
            let kind = try row.decode(0, as: String.self)
            switch kind {
            case "g", "o":
                let text = try row.decode("preferences", as: String?.self)
                sets[try row.decode(1, as: String.self), default: []].append(Member(
                    uid: try row.decode("uid"), subscribed: try row.decode("subscribed"), since: try row.decode("since"),
                    manualAt: try row.decode("manual_at"), unsubscribedAt: try row.decode("unsubscribed_at"),
                    tracked: try row.decode("tracked", as: Bool?.self) ?? false,
                    preferences: cache.effective(text), resolved: cache.resolve(text, type: kind == "o" ? .oneOnOne : .group),
                    mutedUntil: try row.decode("muted_until"), digestWindow: try row.decode("digest_window"), level: try Self.level(row)))
            case "x":
                messages[try row.decode(2, as: String.self)] = (try row.decode(1), try row.decode(3))
            case "l":
                large.append(try row.decode(2, as: String.self))
            default:
                mentioned[try row.decode(2, as: String.self), default: []].insert(try row.decode("uid", as: String.self))
            }
        }
        var last: String?
        var jobs: [JobRow] = []
        // SPEC §17: routed in the order the messages came, so that a reply opens a recipient's
        // digest window that a later reply of the same batch is held by
        var windows = DigestWindows(settings: settings)
        var routed: Set<String> = []
        for item in created where routed.insert(item.message.id).inserted {
            guard let message = messages[item.message.id] else { continue }
            let messageID = item.message.id
            let mentions = mentioned[messageID] ?? []
            for member in sets[message.set] ?? [] {
                let uid = member.uid
                last = EventJobs.later(uid, than: last)
                guard uid != item.message.sender else { continue }
                let subscription = Routing.SubscriptionState(subscribed: member.subscribed, since: member.since, manualAt: member.manualAt,
                                                             unsubscribedAt: member.unsubscribedAt, asOf: item.message.sentAt)
                let input = Self.input(item.message, recipient: uid, subscription: subscription,
                                       mentionedExplicitly: mentions.contains(uid),
                                       preferences: member.preferences, settings: settings, mutedUntil: member.mutedUntil, now: cache.now,
                                       resolved: member.resolved, level: member.level, tracked: member.tracked)
                let decision = Routing.decide(input)
                guard case .notified(let reason) = decision.outcome else { continue }
                if Routing.isDigestible(reason, isReply: input.isReply), member.preferences.replyDigestSeconds > 0,
                   windows.holds(thread: item.message.parentID ?? messageID, recipient: uid, message: messageID,
                                 at: message.heraldAt ?? cache.now, stored: member.digestWindow,
                                 seconds: member.preferences.replyDigestSeconds) {
                    continue
                }
                jobs.append((item, uid, reason, Self.privacy(settings: settings, preferences: member.preferences)))
            }
        }
        let produced = try insert(jobs, on: connection)
        try windows.open(app: app, on: connection)
        return (last, produced, large, found)
    }

    /// Writes jobs as blocks (`sql/0024_job_blocks.sql`): the recipients of one message's event,
    /// in the order given, up to 1,024 per block, with their reasons (as codes) and privacy
    /// switches; one row per block, whatever the count of recipients. The push payload is built
    /// from the message when a worker claims a job (`JobPayload`), and so is the badge (SPEC §9:
    /// the unread count when claimed). A job of a `message.created` is always for its message's
    /// own creation, which the message row records, so such a block names no event; an edit's
    /// names the edit. When jobs may exist already (`mayExist`: a catch-up, a batch run again),
    /// the (event, recipient) pairs that have one are left out. Returns the count of jobs written.
    package func insert(_ jobs: [JobRow],
                on connection: PostgresConnection, mayExist: Bool? = nil) throws -> Int {
        guard !jobs.isEmpty else { return 0 }
        func source(_ job: JobRow) -> String? { job.created.ownEvent ? nil : job.created.event.source }
        func event(_ job: JobRow) -> String? { job.created.ownEvent ? nil : job.created.event.id }
        func type(_ job: JobRow) -> String? { job.created.ownEvent ? nil : job.created.event.type }
        var jobs = jobs
        if mayExist ?? jobsMayExist {
            // The rare path (a catch-up, a batch run again): the (event, recipient) pairs that have
            // a job already are left out first, then the rest are blocked as below.
            let kept = try connection.query("""
                SELECT x.n FROM unnest(\(jobs.map { $0.created.message.id })::text[], \(jobs.map { $0.recipient })::text[], \(jobs.map(source))::text[], \(jobs.map(event))::text[]) WITH ORDINALITY AS x(message_id, recipient, source, event, n)
                 WHERE NOT EXISTS (SELECT 1 FROM job_blocks b
                                    WHERE b.app = \(app) AND b.message_id = x.message_id AND b.event_source IS NOT DISTINCT FROM x.source
                                      AND b.event_id IS NOT DISTINCT FROM x.event AND x.recipient = ANY (b.recipients))
                   AND NOT EXISTS (SELECT 1 FROM job_rows r
                                    WHERE r.app = \(app) AND r.message_id = x.message_id AND r.recipient = x.recipient
                                      AND r.event_source IS NOT DISTINCT FROM x.source AND r.event_id IS NOT DISTINCT FROM x.event)
                 ORDER BY x.n
                """)
            jobs = try kept.map { jobs[try $0.decode(0, as: Int.self) - 1] }
            guard !jobs.isEmpty else { return 0 }
        }
        // The blocks made here: the jobs of one (message, event) in the order given, up to
        // JobBlocks.size a block, blocks in the order of their first job; each block a slice of
        // the recipients (no sort, window or aggregate in SQL: S2's insert took 3.4–4.2 ms a round so).
        struct Key: Hashable { let message: String, source: String?, event: String? }
        var open: [Key: Int] = [:]
        var blocks: [(first: JobRow, members: [Int])] = []
        for (index, job) in jobs.enumerated() {
            let key = Key(message: job.created.message.id, source: source(job), event: event(job))
            if let block = open[key], blocks[block].members.count < Int(JobBlocks.size) {
                blocks[block].members.append(index)
            } else {
                open[key] = blocks.count
                blocks.append((job, [index]))
            }
        }
        var recipients: [String] = [], reasons: [Int] = [], privacy: [Bool] = [], bounds: [Int] = []
        recipients.reserveCapacity(jobs.count); reasons.reserveCapacity(jobs.count); privacy.reserveCapacity(jobs.count)
        for block in blocks {
            for index in block.members {
                recipients.append(jobs[index].recipient)
                reasons.append(jobs[index].reason.code)
                privacy.append(jobs[index].privacy)
            }
            bounds.append(recipients.count)
        }
        try connection.send("""
            INSERT INTO job_blocks (app, message_id, event_source, event_id, event_type, stop, recipients, reasons, privacy)
            SELECT \(app), b.message_id, b.source, b.event, b.type, b.stop,
                   (\(recipients)::text[])[b.last - b.stop + 1:b.last], (\(reasons)::smallint[])[b.last - b.stop + 1:b.last],
                   (\(privacy)::boolean[])[b.last - b.stop + 1:b.last]
              FROM unnest(\(blocks.map { $0.first.created.message.id })::text[], \(blocks.map { source($0.first) })::text[], \(blocks.map { event($0.first) })::text[], \(blocks.map { type($0.first) })::text[], \(bounds)::integer[], \(blocks.map { $0.members.count })::integer[])
                   WITH ORDINALITY AS b(message_id, source, event, type, last, stop, n)
             ORDER BY b.n   -- block ids (and so job ids and claim order) follow the order given
            """)
        return jobs.count
    }

    /// A row's `level` column: the recipient's level for the conversation (SPEC §18), if any.
    package static func level(_ row: PostgresRow) throws -> Routing.ConversationLevel? {
        try row.decode("level", as: String?.self).flatMap(Routing.ConversationLevel.init(rawValue:))
    }

    /// The SQL of one recipient's level for a conversation (`uid` and `conversation` are SQL
    /// expressions), for the paths that route one recipient at a time.
    package static func levelOf(uid: SQL, conversation: SQL, app: SQL) -> SQL {
        "(SELECT cl.level FROM conversation_levels cl WHERE cl.app = \(app) AND cl.uid = \(uid) AND cl.conversation_id = \(conversation))"
    }

    /// The SQL condition that picks a group's members for a walk in byte order (`ORDER BY
    /// uid COLLATE "C"`), from the uid after `after` (NULL: from the first). The group is named
    /// as one key, ARRAY[app, group_id], which only the walk's index has
    /// (`sql/0031_group_members_walk.sql`), so that no look-up of one member can take that index
    /// for the primary key's. The start is a bound in every plan: `uid > coalesce(after, '')`
    /// (SPEC §1: a uid has at least one character), never `after IS NULL OR uid > after`, which a
    /// generic plan keeps as a filter — each chunk of a walk then read the group from its start
    /// (W3 after W1 in `make bench`: 4.6 s). The app also stands alone (`app = …`): Citus routes
    /// the statement by it, and it is only a filter on the walk's index scan.
    /// `alias` is the group_members alias; the rest SQL.
    package static func groupWalk(_ alias: SQL, group: SQL, after: SQL, app: SQL) -> SQL {
        """
        ARRAY[\(alias).app, \(alias).group_id] = ARRAY[\(app)::text, \(group)] AND \(alias).app = \(app)
                                   AND \(alias).uid COLLATE "C" > coalesce(\(after)::text, '') COLLATE "C"
        """
    }

    /// The SQL of the end of one recipient's mute of a message's conversation (SPEC §7.3): a
    /// group's by its id, a one-on-one chat's by the other user (`other`: the sender, the reactor).
    package static func mutedUntilOf(uid: SQL, group: SQL, other: SQL, app: SQL) -> SQL {
        """
        (SELECT mu.until FROM user_mutes mu
          WHERE mu.app = \(app) AND mu.uid = \(uid)
            AND mu.conversation_type = CASE WHEN \(group) IS NULL THEN 'oneOnOne' ELSE 'group' END
            AND mu.conversation_id = coalesce(\(group), \(other)))
        """
    }

    /// The decision's input for one recipient of a message.
    package static func input(_ message: DomainEvent.MessageCreated, recipient uid: String, subscription: Routing.SubscriptionState,
                      mentionedExplicitly: Bool,
                      preferences: EffectivePreferences, settings: AppSettings, mutedUntil: Int64?, now: Int64,
                      resolved: (Routing.Preferences, LocalTime)? = nil,
                      level: Routing.ConversationLevel? = nil, tracked: Bool = false) -> Routing.Input {
        var input = Routing.Input(isReply: message.parentID != nil,
                                  conversation: message.conversation.groupID == nil ? .oneOnOne : .group)
        input.silentCustom = message.category == "custom" && message.sendNotification != true
        input.isSender = message.sender == uid
        input.subscription = subscription
        input.mentionedExplicitly = mentionedExplicitly
        input.mentionedAll = message.mentionsAll
        input.quotesRecipient = message.quotedSender == uid
        let (effective, localTime) = resolved ?? resolve(preferences, type: input.conversation, now: now)
        input.preferences = effective
        input.level = level
        input.tracked = tracked
        input.mutedUntil = mutedUntil
        input.bypassForMentions = settings.bypassPreferencesForMentions
        input.bypassForAll = settings.bypassPreferencesForAll
        input.now = now
        input.localTime = localTime
        return input
    }

    /// A user's effective preferences for a conversation type, and the local time in their zone.
    package static func resolve(_ preferences: EffectivePreferences, type: Routing.ConversationType,
                        now: Int64) -> (Routing.Preferences, LocalTime) {
        let effective = Routing.Preferences(preferences, type: type)
        return (effective, LocalTime(epochMilliseconds: now, timeZone: effective.timezone))
    }

    /// A user's effective preferences from their stored choices (`user_preferences.preferences`
    /// as text; nil when they stored none).
    package static func effective(stored text: String?, settings: AppSettings) -> EffectivePreferences {
        let user = text.flatMap { try? JSONParser.parse(Array($0.utf8)) }.map(UserPreferences.init(stored:)) ?? UserPreferences()
        return EffectivePreferences(user: user, app: settings)
    }
}
