import HeraldDomain
import Postgres

/// SPEC §11.3, member actions: a `member.*` event that changes current membership — not one
/// superseded by newer evidence, not a snapshot, not a sent message's evidence — and every
/// `member.unbanned` and `member.scopeChanged` notify the group's members whose preference for
/// that action is `SUBSCRIBE` (`Routing.decide(_: MemberActionInput)`), except the event's
/// subject and actor: one `memberAction` job per (event, recipient), which names no message.
/// What the job says is kept in `member_actions`, keyed by the event.
///
/// Runs in the ingest transaction, which holds the group's lock exclusively for member events.
/// Groups above `largeGroupThreshold` get a fan-out task (`FanoutWorker`), worked with `produce`.
package enum MemberActionJobs {
    package struct Item {
        package let event: IncomingEvent
        package let change: DomainEvent.MembershipChange

        package init(event: IncomingEvent, change: DomainEvent.MembershipChange) {
            self.event = event
            self.change = change
        }
    }

    /// The latest join and removal evidence of each (group, uid) of `changes`, keyed by
    /// `key(group:uid:)`.
    package typealias State = [[UInt8]: (joined: Int64?, removed: Int64?)]

    package static func key(group: String, uid: String) -> [UInt8] { Array(group.utf8) + [0] + Array(uid.utf8) }

    package static func state(app: String, of changes: [DomainEvent.MembershipChange], on connection: PostgresConnection) throws -> State {
        guard !changes.isEmpty else { return [:] }
        var state: State = [:]
        for row in try connection.query("""
            SELECT g.group_id, g.uid, g.joined_at, g.removed_at
              FROM unnest(\(changes.map(\.guid))::text[], \(changes.map(\.uid))::text[]) AS x(g, u)
              CROSS JOIN LATERAL (SELECT * FROM group_members g WHERE g.app = \(app) AND g.group_id = x.g AND g.uid = x.u OFFSET 0) g
            """) {
            state[key(group: try row.decode("group_id"), uid: try row.decode("uid"))] =
                (try row.decode("joined_at"), try row.decode("removed_at"))
        }
        return state
    }

    /// The membership events of a batch that changed current membership, given the state of
    /// their members before and after the batch: for each member at most one, the earliest join
    /// (for a member who was not one) or removal (for one who was) that no later evidence of the
    /// other kind outranks. On equal times a removal wins, as everywhere. A message of the batch
    /// from a member-to-be (`sentBy`: the earliest, by member) that comes before a join made them
    /// a member first: that join is not the change (as when the message arrives in an earlier batch).
    package static func changing(_ items: [Item], before: State, after: State, sentBy: [[UInt8]: Int64] = [:]) -> [Item] {
        func member(_ state: (joined: Int64?, removed: Int64?)?) -> Bool {
            guard let joined = state?.joined else { return false }
            return joined > (state?.removed ?? -1)
        }
        var chosen: [[UInt8]: Item] = [:]
        for item in items {
            let change = item.change
            let key = key(group: change.guid, uid: change.uid)
            let was = member(before[key]), now = member(after[key])
            guard was != now, now == change.joined else { continue }
            let stands = change.joined ? change.at > (after[key]?.removed ?? -1) : change.at >= (after[key]?.joined ?? -1)
            guard stands else { continue }
            if change.joined, let sent = sentBy[key], change.at > sent, sent > (after[key]?.removed ?? -1) { continue }
            if let earlier = chosen[key], earlier.change.at <= change.at { continue }
            chosen[key] = item
        }
        return items.filter { item in
            chosen[key(group: item.change.guid, uid: item.change.uid)].map { $0.event.source == item.event.source && $0.event.id == item.event.id } ?? false
        }
    }

    /// Records what the notifying `items` say and makes their jobs (unless stale); returns how
    /// many were made.
    package static func make(app: String, _ items: [Item], appSettings: BatchSettings, on connection: PostgresConnection) throws -> Int {
        guard !items.isEmpty else { return 0 }
        let settings = try appSettings.get()
        let now = appSettings.appliedAt
        // a stale event wakes nobody (`Routing.EventAge`): its recipients are not read
        let due = items.filter { !settings.age(of: $0.change.at, appliedAt: now).isStale }
        guard !due.isEmpty else { return 0 }
        try connection.query("""
            INSERT INTO member_actions (app, event_source, event_id, group_id, uid, actor, action, scope, at)
            SELECT \(app), x.* FROM unnest(\(due.map(\.event.source))::text[], \(due.map(\.event.id))::text[], \(due.map(\.change.guid))::text[], \(due.map(\.change.uid))::text[], \(due.map(\.change.actor))::text[], \(due.map(\.change.action.rawValue))::text[], \(due.map(\.change.scope))::text[],
                                       \(due.map(\.change.at))::bigint[]) AS x
            ON CONFLICT DO NOTHING
            """)
        let large = try EventJobs.largeGroups(app: app, due.map(\.change.guid), threshold: settings.largeGroupThreshold,
                                              on: connection)
        try EventJobs.enqueue(app: app, due.filter { large.contains($0.change.guid) }.map {
            EventJobs.Task(event: $0.event, messageID: nil, subjectID: $0.change.guid)
        }, on: connection)
        return try produce(app: app, due.filter { !large.contains($0.change.guid) }.map(\.event), settings: settings, now: now,
                           after: nil, limit: nil, on: connection).produced
    }

    /// Decides and inserts the jobs of the recorded member actions of `events` for the group's
    /// members — all of them, or for one event the next `limit` members after the uid `after`
    /// (a fan-out chunk). Returns the last member uid looked at and the count of jobs inserted.
    ///
    /// A user who stored no preferences has the app's: unless the app's default for the action is
    /// `SUBSCRIBE`, none of them can be notified, so the query skips them.
    package static func produce(app: String, _ events: [IncomingEvent], settings: AppSettings, now: Int64, after: String?, limit: Int?,
                        on connection: PostgresConnection) throws -> (last: String?, produced: Int) {
        guard !events.isEmpty else { return (nil, 0) }
        let defaults = EffectivePreferences(app: settings)
        let everyone = MemberAction.allCases.filter { defaults.memberActions[$0] == .subscribe }.map(\.rawValue)
        let rows = try connection.query("""
            WITH a AS (
                SELECT x.n, a.group_id, a.uid, a.actor, a.action, a.action = ANY (\(everyone)::text[]) AS everyone
                  FROM unnest(\(events.map(\.source))::text[], \(events.map(\.id))::text[]) WITH ORDINALITY AS x(source, id, n)
                  -- through its key, whatever the young table's statistics say
                  CROSS JOIN LATERAL (SELECT * FROM member_actions a
                                       WHERE a.app = \(app) AND a.event_source = x.source AND a.event_id = x.id OFFSET 0) a
                 WHERE NOT EXISTS (SELECT 1 FROM deleted_groups d WHERE d.app = \(app) AND d.group_id = a.group_id)
            )
            SELECT a.n, a.action, g.uid, up.preferences::text AS preferences,
                   (SELECT mu.until FROM user_mutes mu
                     WHERE mu.app = \(app) AND mu.uid = g.uid AND mu.conversation_type = 'group'
                       AND mu.conversation_id = a.group_id) AS muted_until
              FROM a CROSS JOIN LATERAL (
                    SELECT g.uid FROM group_members g
                     WHERE \(Fanout.groupWalk("g", group: "a.group_id", after: "\(after)", app: "\(app)")) AND herald_member_now(g.joined_at, g.removed_at)
                       AND g.uid <> a.uid AND g.uid IS DISTINCT FROM a.actor
                       AND (a.everyone OR EXISTS (SELECT 1 FROM user_preferences up WHERE up.app = \(app) AND up.uid = g.uid))
                     ORDER BY g.uid COLLATE "C" LIMIT \(limit)) g
              LEFT JOIN user_preferences up ON up.app = \(app) AND up.uid = g.uid
            """)
        guard !rows.isEmpty else { return (nil, 0) }
        var cache = EventJobs.PreferenceCache(settings: settings, now: now)
        var last: String?
        var jobs: [EventJobs.Row] = []
        for row in rows {
            let event = events[try row.decode("n", as: Int.self) - 1]
            let uid = try row.decode("uid", as: String.self)
            last = EventJobs.later(uid, than: last)
            guard let action = MemberAction(rawValue: try row.decode("action", as: String.self)) else { continue }
            let text = try row.decode("preferences", as: String?.self)
            var input = Routing.MemberActionInput()
            input.common = cache.common(text, type: .group, mutedUntil: try row.decode("muted_until"))
            input.action = action
            let preferences = cache.effective(text)
            input.preference = preferences.memberActions[action] ?? .dontSubscribe
            guard case .notified(let reason) = Routing.decide(input).outcome else { continue }
            jobs.append(EventJobs.Row(event: event, messageID: nil, subjectID: nil, recipient: uid, kind: .memberAction,
                                      reason: reason.rawValue, privacy: Fanout.privacy(settings: settings, preferences: preferences)))
        }
        return (last, try EventJobs.insert(app: app, jobs, on: connection))
    }
}
