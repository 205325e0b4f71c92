import HeraldDomain
import Postgres
import JSON

/// message.created (SPEC §4, §5.1, §8): the message, its first version and its mentions are
/// stored (the first creation of an id wins, as a redelivery under a new event id would); its
/// sender and mentions are the round's subscription triggers, its sender in a group is membership
/// evidence; after the round's derivation its recipients are routed (`Fanout.run`) and the
/// messages routed before a late trigger of this round are routed again for it (`catchUp`).
struct MessageCreatedHandler: IngestHandler {
    let app: String
    /// One per message id, in the batch's order (read by `IngestStore.apply`: every one of them
    /// must come back fresh from `statementsAhead`).
    private(set) var created: [DomainEvent.MessageCreated] = []
    /// The event that brought each message.created, for its jobs.
    private var events: [[UInt8]: IncomingEvent] = [:]
    /// What the round's first round trip stored already (nil: stored by `store`).
    var prestored: FactWriter.Prestored?
    /// The messages whose creation was new in this round.
    private var fresh: [DomainEvent.MessageCreated] = []

    init(app: String) { self.app = app }

    mutating func add(_ message: DomainEvent.MessageCreated, event: IncomingEvent) {
        // Keys compare as bytes, as PostgreSQL does.
        let key = Array(message.id.utf8)
        guard events[key] == nil else { return }
        created.append(message)
        events[key] = event
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !created.isEmpty else { return }
        let filledPlaceholders: [String]
        if let prestored {
            // stored by the round's first round trip, every message new (`statementsAhead`)
            (fresh, filledPlaceholders) = try Self.applied(prestored.applied, of: created)
        } else {
            (fresh, filledPlaceholders) = try insert(on: connection)
        }
        round.fresh = fresh
        round.newReplies = fresh.filter { $0.parentID != nil }.map(\.id)
        // A message inserted fresh has no other version: its triggers are its sender and its
        // mentions at its time, which herald_apply may apply incrementally. Any other
        // (republished, or filling a placeholder) is recomputed from its facts.
        let placeholders = Set(filledPlaceholders)
        round.textMessages.formUnion(filledPlaceholders)
        let incremental = Set(fresh.lazy.filter { !placeholders.contains($0.id) }.map(\.id))
        for m in created {
            round.touchedThreads.insert(m.threadID)
            if m.parentID == nil { round.recount.insert(m.id) }
            let at: Int64? = incremental.contains(m.id) ? m.sentAt : nil
            if at == nil { round.touchedMessages.insert(m.id) }
            round.key(m.sender, thread: m.threadID, at: at)
            for uid in m.mentions { round.key(uid, thread: m.threadID, at: at) }
        }
        // Only a message seen for the first time is membership evidence (a republished one
        // with another time is not), and it changes something only for a sender who was not
        // already a member since before it: for an active member, nothing needs recomputing.
        let senders = fresh.filter { $0.conversation.groupID != nil }
        for m in senders { round.membership(group: m.conversation.groupID!, uid: m.sender, joined: m.sentAt, removed: nil) }
        if let evidence = Self.evidenceQuery(senders, app: app) {
            var groups: [String] = []
            for row in try prestored?.evidence ?? connection.query(evidence) {
                groups.append(try row.decode("g", as: String.self))
                round.evidenceGroups.append(groups.last!)
                round.evidenceUsers.append(try row.decode("u", as: String.self))
            }
            // Membership changes touch every thread of the group: they need the group exclusively.
            var needed = LockSet()
            for group in groups { needed.group(group) }
            let missing = round.held.missing(from: needed)
            if !missing.isEmpty { throw NeedsLocks(locks: missing) }
        }
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        // Triggers of this round that subscribe their users from a time before messages that were
        // routed already: those messages are routed again for them (SPEC §4). Found in the round
        // trip of the routing query (neither reads what the other writes: the catch-up leaves out
        // this round's messages, whose jobs alone the routing writes).
        var triggers = round.movedTriggers
        for m in fresh {
            triggers.append((m.sender, m.threadID, m.sentAt))
            for uid in m.mentions { triggers.append((uid, m.threadID, m.sentAt)) }
            if let author = m.parentSender, m.parentID != nil { triggers.append((author, m.threadID, m.sentAt)) }
        }
        triggers += round.editTriggers
        let catchUp = Fanout(app: app).catchUpQuery(triggers, excluding: fresh.map(\.id))
        // Jobs, after subscriptions and unread counts include this round.
        let routed = try Fanout(app: app, jobsMayExist: round.jobsMayExist).run(fresh.compactMap { message in
            events[Array(message.id.utf8)].map { Fanout.Created(event: $0, message: message) }
        }, appSettings: round.settings, alongside: catchUp.map { [$0] } ?? [], on: connection)
        var produced = routed.produced
        if catchUp != nil {
            produced += try Fanout(app: app).catchUp(found: routed.found[0], appSettings: round.settings, on: connection)
        }
        return produced
    }

    /// `insert`'s statements for when every message is new (none seen before, none filling a
    /// placeholder), for a caller that sends them ahead in one round trip: the messages' insert
    /// (its answer is `Prestored.applied`), their versions and mentions, then the membership
    /// evidence query (its rows are `Prestored.evidence`; `evidence`: its index, nil when no
    /// message is in a group). The caller checks `applied` finds every message new, else it
    /// rolls back and writes the usual way.
    func statementsAhead() -> (statements: [SQL], evidence: Int?) {
        guard !created.isEmpty else { return ([], nil) }
        var statements = [messagesInsert()] + versionStatements(created)
        let evidence = Self.evidenceQuery(created.filter { $0.conversation.groupID != nil }, app: app)
        if let evidence { statements.append(evidence) }
        return (statements, evidence == nil ? nil : statements.count - 1)
    }

    /// Stores the messages; returns those whose creation was new, and of those the ids that
    /// filled a placeholder.
    private func insert(on connection: PostgresConnection) throws -> (fresh: [DomainEvent.MessageCreated], placeholders: [String]) {
        let (fresh, placeholders) = try Self.applied(connection.query(messagesInsert()), of: created)
        guard !fresh.isEmpty else { return ([], []) }
        // Mentions of edits that arrived first without parentId were filed under the message's
        // own id: file them under its thread now (only a placeholder can have such edits).
        let filled = Set(placeholders)
        let replies = fresh.filter { $0.parentID != nil && filled.contains($0.id) }
        if !replies.isEmpty {
            try connection.send("""
                UPDATE mentions mn SET thread_id = x.parent
                  FROM unnest(\(replies.map(\.id))::text[], \(replies.map { $0.parentID! })::text[]) AS x(id, parent)
                 WHERE mn.app = \(app) AND mn.message_id = x.id AND mn.thread_id <> x.parent
                """)
        }
        for statement in versionStatements(fresh) { try connection.send(statement) }
        return (fresh, placeholders)
    }

    /// The insert of the messages of `created`; it answers the id of each message whose creation
    /// is new, and whether its row existed (`updated`).
    private func messagesInsert() -> SQL {
        // A second message.created for a message already seen (a republish under a new event id)
        // changes nothing: the first one's version and mentions stand.
        """
            INSERT INTO messages AS m (app, id, conversation_id, receiver_type, group_id, user_a, user_b, sender, parent_id,
                                       parent_sender, sent_at, text, mentions_all, category, type, quoted_message_id,
                                       quoted_sender, send_notification, event_source, event_id, event_type, created_seen)
            SELECT \(app), x.*, true
              FROM unnest(\(created.map(\.id))::text[], \(created.map(\.conversation.id))::text[], \(created.map(\.conversation.receiverType))::text[], \(created.map(\.conversation.groupID))::text[], \(created.map(\.conversation.userA))::text[], \(created.map(\.conversation.userB))::text[], \(created.map(\.sender))::text[], \(created.map(\.parentID))::text[],
                          \(created.map(\.parentSender))::text[], \(created.map(\.sentAt))::bigint[], \(created.map(\.text))::text[], \(created.map(\.mentionsAll))::boolean[], \(created.map(\.category))::text[], \(created.map(\.type))::text[], \(created.map(\.quotedMessageID))::text[],
                          \(created.map(\.quotedSender))::text[], \(created.map(\.sendNotification))::boolean[], \(created.map { events[Array($0.id.utf8)]!.source })::text[], \(created.map { events[Array($0.id.utf8)]!.id })::text[], \(created.map { events[Array($0.id.utf8)]!.type })::text[]) AS x
            ON CONFLICT (app, id) DO UPDATE SET
                conversation_id = EXCLUDED.conversation_id, receiver_type = EXCLUDED.receiver_type,
                group_id = EXCLUDED.group_id, user_a = EXCLUDED.user_a, user_b = EXCLUDED.user_b,
                sender = EXCLUDED.sender, parent_id = EXCLUDED.parent_id, parent_sender = EXCLUDED.parent_sender,
                sent_at = EXCLUDED.sent_at, mentions_all = EXCLUDED.mentions_all, category = EXCLUDED.category,
                type = EXCLUDED.type, quoted_message_id = EXCLUDED.quoted_message_id,
                quoted_sender = EXCLUDED.quoted_sender, send_notification = EXCLUDED.send_notification,
                event_source = EXCLUDED.event_source, event_id = EXCLUDED.event_id, event_type = EXCLUDED.event_type,
                created_seen = true
            WHERE NOT m.created_seen
            RETURNING id, xmax <> 0 AS updated
            """
    }

    /// The messages of `created` whose creation `messagesInsert` found new, and of those the ids
    /// whose row existed already: a row that existed (an edit or a deletion arrived first) was
    /// updated, not inserted (xmax set), and its versions may hold a later text than the creation's.
    static func applied(_ rows: PostgresRows, of created: [DomainEvent.MessageCreated]) throws
        -> (fresh: [DomainEvent.MessageCreated], placeholders: [String]) {
        let appliedIDs = Set(try rows.map { try $0.decode("id", as: String.self) })
        let placeholders = try rows.filter { try $0.decode("updated", as: Bool.self) }.map { try $0.decode("id", as: String.self) }
        return (created.filter { appliedIDs.contains($0.id) }, placeholders)
    }

    /// The versions and mentions of messages whose creation is new.
    private func versionStatements(_ fresh: [DomainEvent.MessageCreated]) -> [SQL] {
        let ids = fresh.map(\.id), at = fresh.map(\.sentAt), mentions = fresh.map(\.mentions)
        var statements: [SQL] = ["""
            INSERT INTO message_versions (app, message_id, at, mentions, mentions_all, text)
            SELECT \(app), x.id, x.at, ARRAY(SELECT jsonb_array_elements_text(x.mentions::jsonb)), x.mentions_all, x.text
              FROM unnest(\(ids)::text[], \(at)::bigint[], \(mentions.map(Self.jsonArray))::text[], \(fresh.map(\.mentionsAll))::boolean[], \(fresh.map(\.text))::text[]) AS x(id, at, mentions, mentions_all, text)
            ON CONFLICT DO NOTHING
            """]
        var rows = MentionRows()
        for message in fresh {
            for uid in message.mentions {
                rows.add(message: message.id, at: message.sentAt, uid: uid, conversation: message.conversation.id, thread: message.threadID)
            }
        }
        if let insert = rows.insert(app: app) { statements.append(insert) }
        return statements
    }

    /// The senders of new messages in groups who were not already members since before their
    /// message (only a message seen for the first time is membership evidence, and for an active
    /// member nothing needs recomputing); nil without such messages.
    private static func evidenceQuery(_ senders: [DomainEvent.MessageCreated], app: String) -> SQL? {
        guard !senders.isEmpty else { return nil }
        return """
            SELECT DISTINCT x.g, x.u FROM unnest(\(senders.map { $0.conversation.groupID! })::text[], \(senders.map(\.sender))::text[], \(senders.map(\.sentAt))::bigint[]) AS x(g, u, t)
              LEFT JOIN group_members gm ON gm.app = \(app) AND gm.group_id = x.g AND gm.uid = x.u
             WHERE NOT coalesce(gm.joined_at <= x.t AND herald_member_now(gm.joined_at, gm.removed_at), false)
               -- a member now whose known membership starts later: the message only moves
               -- that start back, which matters to mentions of them in between alone
               AND (NOT coalesce(herald_member_now(gm.joined_at, gm.removed_at), false)
                    -- (through mentions_by_user: `at + 0` is no index column, so the thread index,
                    -- where uid is not next to app, is not taken for the time range: that read the
                    -- app's every mention for each sender, 37 pages each at 6,000 mentions, W1)
                    OR EXISTS (SELECT 1 FROM mentions mn
                                WHERE mn.app = \(app) AND mn.uid = x.u AND mn.conversation_id = 'group_' || x.g
                                  AND mn.at + 0 >= x.t AND mn.at + 0 < gm.joined_at))
            """
    }

    static func jsonArray(_ values: [String]) -> String {
        JSONValue.array(values.map { .string($0) }).jsonText
    }
}

/// Rows of the `mentions` table (a message's or an edit's), inserted in one statement.
struct MentionRows {
    private var ids: [String] = [], at: [Int64] = [], uids: [String] = [], conversations: [String] = [], threads: [String] = []

    mutating func add(message: String, at time: Int64, uid: String, conversation: String, thread: String) {
        ids.append(message); at.append(time); uids.append(uid); conversations.append(conversation); threads.append(thread)
    }

    /// nil without rows.
    func insert(app: String) -> SQL? {
        guard !ids.isEmpty else { return nil }
        return """
            INSERT INTO mentions (app, message_id, at, uid, conversation_id, thread_id)
            SELECT \(app), x.* FROM unnest(\(ids)::text[], \(at)::bigint[], \(uids)::text[], \(conversations)::text[], \(threads)::text[]) AS x
            ON CONFLICT DO NOTHING
            """
    }
}
