import HeraldDomain
import Postgres

/// What the job producers of messages (`Fanout`), reactions (`ReactionJobs`) and member actions
/// (`MemberActionJobs`) share: preferences worked out once per distinct stored document, the
/// large-group test and fan-out tasks (SPEC §8.3), badges, and the insert of jobs that are not a
/// message's own notification.
/// An app's settings for one batch: read at most once, when a job producer first needs them
/// (a batch of messages, edits, reactions and member events asks several producers).
/// With them, Herald's time of applying the batch (its events' `received_at`): the time its jobs
/// are judged at, staleness included (`Routing.EventAge`).
package final class BatchSettings {
    package let app: String
    package let connection: PostgresConnection
    package let appliedAt: Int64
    private var loaded: AppSettings?

    package init(app: String, on connection: PostgresConnection, appliedAt: Int64, loaded: AppSettings? = nil) {
        self.app = app
        self.connection = connection
        self.appliedAt = appliedAt
        self.loaded = loaded
    }

    package func get() throws -> AppSettings {
        if let loaded { return loaded }
        let settings = try PreferenceStore().settings(app: app, on: connection)
        loaded = settings
        return settings
    }
}

package enum EventJobs {
    /// Effective preferences and local times, worked out once per distinct stored document (most
    /// often none) rather than per recipient.
    package struct PreferenceCache {
        package let settings: AppSettings
        package let now: Int64
        private var parsed: [String: EffectivePreferences] = [:]
        private var resolved: [String: (Routing.Preferences, LocalTime)] = [:]

        package init(settings: AppSettings, now: Int64) {
            self.settings = settings
            self.now = now
        }

        /// The user's effective preferences from `user_preferences.preferences` as text (nil: none stored).
        package mutating func effective(_ text: String?) -> EffectivePreferences {
            if let cached = parsed[text ?? ""] { return cached }
            let preferences = Fanout.effective(stored: text, settings: settings)
            parsed[text ?? ""] = preferences
            return preferences
        }

        /// The conversation type's preferences and the user's local time now.
        package mutating func resolve(_ text: String?, type: Routing.ConversationType) -> (Routing.Preferences, LocalTime) {
            let key = (type == .group ? "g" : "o") + (text ?? "")
            if let cached = resolved[key] { return cached }
            let shared = Fanout.resolve(effective(text), type: type, now: now)
            resolved[key] = shared
            return shared
        }

        /// The decision's common inputs for a reaction or member action recipient.
        package mutating func common(_ text: String?, type: Routing.ConversationType, mutedUntil: Int64?) -> Routing.Common {
            var common = Routing.Common()
            (common.preferences, common.localTime) = resolve(text, type: type)
            common.mutedUntil = mutedUntil
            common.now = now
            return common
        }
    }

    /// The later of two uids in byte order (a chunk's cursor: the last member looked at).
    package static func later(_ uid: String, than last: String?) -> String {
        guard let last, Array(uid.utf8).lexicographicallyPrecedes(Array(last.utf8)) else { return uid }
        return last
    }

    /// The groups of `groups` with more current members than the app's `largeGroupThreshold`.
    package static func largeGroups(app: String, _ groups: [String], threshold: Int, on connection: PostgresConnection) throws -> Set<String> {
        guard !groups.isEmpty else { return [] }
        var large: Set<String> = []
        for row in try connection.query("""
            SELECT x.g FROM unnest(\(Array(Set(groups)))::text[]) AS x(g) WHERE \(isLarge(group: "x.g", threshold: "\(threshold)", app: app))
            """) {
            large.insert(try row.decode("g", as: String.self))
        }
        return large
    }

    /// The SQL condition that group `group` (an SQL expression) has more current members than
    /// `threshold` (counted up to one past it: a probe of the threshold's size, not of the group's).
    /// The members are read as the fan-out walks them, in the walk's index and its order: a plan
    /// made for any threshold (a generic plan, as ingest's) took the count for a scan of every
    /// group's members, 60 ms a group on a table of 850,000 (`MigrationTests`).
    package static func isLarge(group: SQL, threshold: SQL, app: String) -> SQL {
        """
        (SELECT count(*) FROM (SELECT 1 FROM group_members gm
                                WHERE \(Fanout.groupWalk("gm", group: group, after: "NULL", app: "\(app)"))
                                  AND herald_member_now(gm.joined_at, gm.removed_at)
                                ORDER BY gm.uid COLLATE "C" LIMIT \(threshold) + 1) c) > \(threshold)
        """
    }

    /// A fan-out task for an event whose recipients are produced outside the request.
    package struct Task {
        package let event: IncomingEvent
        package let messageID: String?
        package let subjectID: String?
    }

    package static func enqueue(app: String, _ tasks: [Task], on connection: PostgresConnection) throws {
        guard !tasks.isEmpty else { return }
        try connection.send("""
            INSERT INTO fanout_tasks (app, event_source, event_id, event_type, message_id, subject_id)
            SELECT \(app), x.* FROM unnest(\(tasks.map(\.event.source))::text[], \(tasks.map(\.event.id))::text[], \(tasks.map(\.event.type))::text[], \(tasks.map(\.messageID))::text[], \(tasks.map(\.subjectID))::text[]) AS x
            ON CONFLICT (app, event_source, event_id) DO NOTHING
            """)
    }

    /// Each recipient's unread thread count now: a job's `badge`.
    package static func badges(app: String, recipients: [String], on connection: PostgresConnection) throws -> [String: Int] {
        var badges: [String: Int] = [:]
        for row in try connection.query("""
            SELECT uid, count(*) AS unread_threads FROM subscriptions
             WHERE app = \(app) AND uid = ANY (\(Array(Set(recipients)))::text[]) AND visible AND has_unread GROUP BY uid
            """) {
            badges[try row.decode("uid", as: String.self)] = try row.decode("unread_threads", as: Int.self)
        }
        return badges
    }

    /// A job that is not a message's own notification (a reaction's, a member action's, a
    /// sync job): its event is named on the row.
    package struct Row {
        package let event: IncomingEvent
        package let messageID: String?
        package let subjectID: String?
        package let recipient: String
        package let kind: JobKind
        package let reason: String
        package var privacy = false
        /// The device that acted, left out of the job's devices.
        package var excludeDevice: String?
        /// A sync job's state: the pin's or save's time (0: removed) and who pinned.
        package var syncAt: Int64?
        package var syncBy: String?
    }

    /// Inserts `rows`, with their badges unless `badges` is false (a silent job shows none); an
    /// (event, recipient) pair that has a job already (a chunk redone after a crash) is left alone.
    /// Returns the count inserted.
    package static func insert(app: String, _ rows: [Row], badges withBadges: Bool = true, on connection: PostgresConnection) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let badges = withBadges ? try badges(app: app, recipients: rows.map(\.recipient), on: connection) : [:]
        return try connection.query("""
            INSERT INTO job_rows (app, message_id, subject_id, recipient, event_source, event_id, event_type, kind, reason, privacy, badge,
                              exclude_device, sync_at, sync_by)
            SELECT \(app), x.message_id, x.subject_id, x.recipient, x.event_source, x.event_id, x.event_type, x.kind, x.reason, x.privacy,
                   x.badge, x.exclude_device, x.sync_at, x.sync_by
              FROM unnest(\(rows.map(\.messageID))::text[], \(rows.map(\.subjectID))::text[], \(rows.map(\.recipient))::text[], \(rows.map(\.event.source))::text[], \(rows.map(\.event.id))::text[], \(rows.map(\.event.type))::text[], \(rows.map(\.kind.stored))::text[],
                                       \(rows.map(\.reason))::text[], \(rows.map(\.privacy))::boolean[], \(rows.map { badges[$0.recipient] ?? 0 })::int[], \(rows.map(\.excludeDevice))::text[], \(rows.map(\.syncAt))::bigint[], \(rows.map(\.syncBy))::text[])
                   AS x(message_id, subject_id, recipient, event_source, event_id, event_type, kind, reason, privacy, badge, exclude_device,
                        sync_at, sync_by)
            -- (columns named, not x.*: Citus 13 mixes up the columns of a star in an INSERT … SELECT)
            ON CONFLICT DO NOTHING
            """).affectedRows
    }
}
