import HeraldDomain
import Postgres

/// SPEC §12.3: a change of a pin or a save tells the user's other screens and devices with
/// silent `sync` jobs (`notification` null; `data` `{change, messageId|conversationId, …state}`;
/// `reason` = the change). A message's pin: one job per member with access to its conversation,
/// the actor included; a save: one for the saver; a conversation pin: one for that user, or for
/// every participant of a system pin. The acting device is left out (`excludeDevice`). Sync jobs
/// skip preferences and quiet rules, follow the app switch `syncJobs`, and go through the
/// fan-out tasks in groups above `largeGroupThreshold`.
package enum SyncJobs {
    /// Makes the sync jobs of `changes` and notes them in the readers' change feeds (SPEC §14),
    /// in the ingest transaction; returns how many jobs were made.
    package static func make(app: String, _ changes: [PinStore.Change], appSettings: BatchSettings, on connection: PostgresConnection) throws -> Int {
        guard !changes.isEmpty else { return 0 }
        let settings = try appSettings.get()
        // A pin or save of a message Herald knows to be deleted (or in a deleted thread or group)
        // changes nothing anyone is shown: no job, no feed entry.
        let gone = try deleted(app: app, changes, on: connection)
        let changes = changes.filter { change in
            !(change.messageID.map { gone.messages.contains($0) } ?? false) && !(change.groupID.map { gone.groups.contains($0) } ?? false)
        }
        guard !changes.isEmpty else { return 0 }
        var rows: [Row] = []
        var groups: [(change: PinStore.Change, group: String)] = []
        var unresolved: [PinStore.Change] = []
        for change in changes {
            switch change.subject {
            case .save(_, let uid):
                rows.append(Row(change: change, recipient: uid))
            case .conversationPin(let owner, let conversation):
                if owner != EventParser.system { rows.append(Row(change: change, recipient: owner)) }
                else if let group = conversation.groupID { groups.append((change, group)) }
            case .messagePin(_, let conversation?):
                if let group = conversation.groupID { groups.append((change, group)) }
                else { rows += [conversation.userA, conversation.userB].compactMap { $0 }.map { Row(change: change, recipient: $0) } }
            case .messagePin(_, nil):
                unresolved.append(change)
            }
        }
        // A system pin in a one-on-one conversation: the stored message's two users (none known yet: nobody).
        if !unresolved.isEmpty {
            var users: [String: [String]] = [:]
            for row in try connection.query("""
                SELECT id, user_a, user_b FROM messages WHERE app = \(app) AND id = ANY (\(unresolved.compactMap(\.messageID))::text[]) AND group_id IS NULL
                """) {
                users[try row.decode("id", as: String.self)] = [try row.decode("user_a", as: String?.self), try row.decode("user_b", as: String?.self)].compactMap { $0 }
            }
            for change in unresolved { rows += (change.messageID.flatMap { users[$0] } ?? []).map { Row(change: change, recipient: $0) } }
        }
        var produced = try insert(app: app, rows, settings: settings, now: appSettings.appliedAt, on: connection)
        let large = try EventJobs.largeGroups(app: app, groups.map(\.group), threshold: settings.largeGroupThreshold, on: connection)
        try EventJobs.enqueue(app: app, groups.filter { large.contains($0.group) }.map {
            EventJobs.Task(event: $0.change.event, messageID: $0.change.messageID, subjectID: $0.group)
        }, on: connection)
        produced += try produce(app: app, groups.filter { !large.contains($0.group) }, after: nil, limit: nil, settings: settings, now: appSettings.appliedAt,
                                on: connection).produced
        return produced
    }

    /// The messages (deleted, or in a deleted thread) and groups (deleted) of `changes` that are gone.
    package static func deleted(app: String, _ changes: [PinStore.Change], on connection: PostgresConnection) throws
        -> (messages: Set<String>, groups: Set<String>) {
        let messageIDs = changes.compactMap(\.messageID), groupIDs = changes.compactMap(\.groupID)
        guard !messageIDs.isEmpty || !groupIDs.isEmpty else { return ([], []) }
        var messages: Set<String> = [], groups: Set<String> = []
        for row in try connection.query("""
            SELECT 'm' AS kind, m.id FROM unnest(\(messageIDs)::text[]) AS x(id)
             CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(app) AND m.id = x.id OFFSET 0) m
             WHERE m.deleted_at IS NOT NULL OR m.group_id IN (SELECT d.group_id FROM deleted_groups d WHERE d.app = \(app))
                OR EXISTS (SELECT 1 FROM threads t WHERE t.app = \(app) AND t.parent_id = coalesce(m.parent_id, m.id) AND t.deleted_at IS NOT NULL)
            UNION ALL
            SELECT 'g', d.group_id FROM deleted_groups d WHERE d.app = \(app) AND d.group_id = ANY (\(groupIDs)::text[])
            """) {
            let id = try row.decode("id", as: String.self)
            if try row.decode("kind", as: String.self) == "m" { messages.insert(id) } else { groups.insert(id) }
        }
        return (messages, groups)
    }

    /// The jobs of changes in groups, for the group's current members — all of them, or for one
    /// change the next `limit` members after the uid `after` (a fan-out chunk).
    package static func produce(app: String, _ items: [(change: PinStore.Change, group: String)], after: String?, limit: Int?,
                        settings: AppSettings, now: Int64, on connection: PostgresConnection) throws -> (last: String?, produced: Int) {
        guard !items.isEmpty else { return (nil, 0) }
        var rows: [Row] = []
        var last: String?
        for row in try connection.query("""
            SELECT x.n, g.uid FROM unnest(\(items.map(\.group))::text[]) WITH ORDINALITY AS x(g, n)
             CROSS JOIN LATERAL (SELECT g.uid FROM group_members g
                                  WHERE \(Fanout.groupWalk("g", group: "x.g", after: "\(after)", app: "\(app)")) AND herald_member_now(g.joined_at, g.removed_at)
                                  ORDER BY g.uid COLLATE "C" LIMIT \(limit)) g
            """) {
            let uid = try row.decode("uid", as: String.self)
            last = EventJobs.later(uid, than: last)
            rows.append(Row(change: items[try row.decode("n", as: Int.self) - 1].change, recipient: uid))
        }
        return (last, try insert(app: app, rows, settings: settings, now: now, on: connection))
    }

    /// The change a large group's task fans out, read back from the state its event left; nil when
    /// a later event decides the state now (it has a task of its own), or the message or group is gone.
    package static func stored(app: String, event: IncomingEvent, messageID: String?, group: String,
                       on connection: PostgresConnection) throws -> PinStore.Change? {
        guard let change = try storedState(app: app, event: event, messageID: messageID, group: group, on: connection) else { return nil }
        let gone = try deleted(app: app, [change], on: connection)
        return gone.messages.isEmpty && gone.groups.isEmpty ? change : nil
    }

    package static func storedState(app: String, event: IncomingEvent, messageID: String?, group: String,
                       on connection: PostgresConnection) throws -> PinStore.Change? {
        if let messageID {
            guard let row = try connection.query("""
                SELECT pinned, at, pinned_by FROM message_pins WHERE app = \(app) AND message_id = \(messageID) AND event_source = \(event.source) AND event_id = \(event.id)
                """).first else { return nil }
            return PinStore.Change(event: event, subject: .messagePin(messageID: messageID, conversation: .group(group)),
                                   set: try row.decode("pinned"), at: try row.decode("at"), by: try row.decode("pinned_by"), deviceID: nil)
        }
        guard let row = try connection.query("""
            SELECT pinned, at, device_id FROM conversation_pins
             WHERE app = \(app) AND owner = \(EventParser.system) AND conversation_id = \(Conversation.group(group).id) AND event_source = \(event.source) AND event_id = \(event.id)
            """).first else { return nil }
        return PinStore.Change(event: event, subject: .conversationPin(owner: EventParser.system, conversation: .group(group)),
                               set: try row.decode("pinned"), at: try row.decode("at"), by: EventParser.system,
                               deviceID: try row.decode("device_id"))
    }

    package struct Row {
        package let change: PinStore.Change
        package let recipient: String
    }

    /// Notes every row's change in its recipient's feed, and makes the jobs: silent (no badge),
    /// only with the app switch `syncJobs` on, and not for a replayed backlog (SPEC §11.5: it wakes
    /// no device; the feed still has the change).
    /// `now`: Herald's time of applying the change's event (a fan-out chunk's: when it runs).
    package static func insert(app: String, _ rows: [Row], settings: AppSettings, now: Int64, on connection: PostgresConnection) throws -> Int {
        try ChangeFeed.note(app: app, rows.map { row in
            switch row.change.subject {
            case .messagePin(let id, _): ChangeFeed.Note(uid: row.recipient, kind: "messagePin", subject: id)
            case .save(let id, _): ChangeFeed.Note(uid: row.recipient, kind: "save", subject: id)
            case .conversationPin(let owner, let conversation):
                ChangeFeed.Note(uid: row.recipient, kind: "conversationPin", subject: conversation.id, actor: owner)
            }
        }, on: connection)
        guard settings.syncJobs else { return 0 }
        return try EventJobs.insert(app: app, rows.filter { !settings.age(of: $0.change.at, appliedAt: now).isStale }.map { row in
            let change = row.change
            return EventJobs.Row(event: change.event, messageID: change.messageID, subjectID: change.conversationID,
                                 recipient: row.recipient, kind: .sync, reason: change.change, excludeDevice: change.deviceID,
                                 syncAt: change.set ? change.at : 0, syncBy: change.set ? change.by : nil)
        }, badges: false, on: connection)
    }
}

extension PinStore.Change {
    /// The message a pin or save is of (nil: a conversation pin).
    package var messageID: String? {
        switch subject {
        case .messagePin(let id, _), .save(let id, _): id
        case .conversationPin: nil
        }
    }

    /// The group of the conversation (nil: one-on-one, a save, or not known yet).
    package var groupID: String? {
        switch subject {
        case .messagePin(_, let conversation): conversation?.groupID
        case .save: nil
        case .conversationPin(_, let conversation): conversation.groupID
        }
    }

    /// The conversation, as `data.conversationId` names it (nil: a save, or a pin whose
    /// conversation only the stored message knows).
    package var conversationID: String? {
        switch subject {
        case .messagePin(_, let conversation): conversation?.id
        case .save: nil
        case .conversationPin(_, let conversation): conversation.id
        }
    }
}
