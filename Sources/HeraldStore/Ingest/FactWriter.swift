import HeraldDomain
import Postgres
import JSON

/// Writes the facts of newly accepted events and recomputes what they touch, set-based: one
/// statement per kind of fact, then one refresh of threads and one of subscriptions.
package struct FactWriter {
    package let app: String
    package let events: [IncomingEvent]
    /// Replies of this batch under whose ids earlier facts were filed (see `IngestStore.resolveThreads`).
    package let rehome: [Rehoming]

    // message.created, one per message id (the first wins, as a redelivery under a new event id would)
    /// (read by `IngestStore.apply`: every one of them must come back fresh from `createdStatements`)
    private(set) var created: [DomainEvent.MessageCreated] = []
    /// The event that brought each message.created, for its jobs.
    private var createdEvents: [[UInt8]: IncomingEvent] = [:]
    private var edits: [DomainEvent.MessageEdited] = []
    private var editEvents: [IncomingEvent] = []
    private var deletions: [[UInt8]: DomainEvent.MessageDeleted] = [:]
    /// The event that brought each deletion, for its retractions.
    private var deletionEvents: [[UInt8]: IncomingEvent] = [:]
    private var memberships: [DomainEvent.MembershipChange] = []
    /// Membership events (changing membership or not), for their member-action jobs (SPEC §11.3).
    private var memberEvents: [MemberActionJobs.Item] = []
    private var memberNotices: [MemberActionJobs.Item] = []
    private var reactions: [ReactionJobs.Item] = []
    private var pins = PinStore.Pins()
    private var groupDeletions: [String: Int64] = [:]

    package init(app: String, events: [IncomingEvent], rehome: [Rehoming] = []) {
        self.app = app
        self.events = events
        self.rehome = rehome
        // Keys compare as bytes, as PostgreSQL does.
        var seenCreated: Set<[UInt8]> = []
        for event in events {
            switch event.event {
            case .messageCreated(let m):
                if seenCreated.insert(Array(m.id.utf8)).inserted {
                    created.append(m)
                    createdEvents[Array(m.id.utf8)] = event
                }
            case .messageEdited(let m):
                edits.append(m)
                editEvents.append(event)
            case .messageDeleted(let m):
                if let existing = deletions[Array(m.id.utf8)], existing.deletedAt <= m.deletedAt { continue }
                deletions[Array(m.id.utf8)] = m
                deletionEvents[Array(m.id.utf8)] = event
            case .membership(let change):
                memberships.append(change)
                memberEvents.append(.init(event: event, change: change))
            case .memberNotice(let change):
                memberNotices.append(.init(event: event, change: change))
            case .reaction(let reaction):
                reactions.append(.init(event: event, reaction: reaction))
            case .messagePin(let pin): pins.messages.append((event, pin))
            case .messageSave(let save): pins.saves.append((event, save))
            case .conversationPin(let pin): pins.conversations.append((event, pin))
            case .groupDeleted(let guid, let at):
                groupDeletions[guid] = min(groupDeletions[guid] ?? at, at)
            case .noEffect:
                break
            }
        }
    }

    /// Stores the facts and recomputes what they touch; returns the count of jobs produced.
    package func write(holding held: LockSet, jobsMayExist: Bool = false, settings appSettings: BatchSettings,
                       prestored: Prestored? = nil, on connection: PostgresConnection) throws -> Int {
        var touchedThreads: Set<String> = []
        var touchedMessages: Set<String> = []
        var keyUsers: [String] = []
        var keyThreads: [String] = []
        var keyAt: [Int64?] = []   // the trigger's time, for a key from a message new in this batch
        var evidenceGroups: [String] = []
        var evidenceUsers: [String] = []

        // Deletions first: a reply that was counted as unread before this batch is uncounted.
        var deletedReplies: [String] = []
        if !deletions.isEmpty {
            deletedReplies = try insertDeletions(on: connection)
            for m in deletions.values { touchedThreads.insert(m.threadID) }
        }
        var newReplies: [String] = []
        var fresh: [DomainEvent.MessageCreated] = []
        var filledPlaceholders: [String] = []
        if !created.isEmpty {
            if let prestored {
                // stored by the round's first round trip, every message new (`createdStatements`)
                (fresh, filledPlaceholders) = try Self.applied(prestored.applied, of: created)
            } else {
                (fresh, filledPlaceholders) = try insertCreated(on: connection)
            }
            newReplies = fresh.filter { $0.parentID != nil }.map(\.id)
            // A message inserted fresh has no other version: its triggers are its sender and its
            // mentions at its time, which herald_apply may apply incrementally. Any other
            // (republished, or filling a placeholder) is recomputed from its facts.
            let placeholders = Set(filledPlaceholders)
            let incremental = Set(fresh.lazy.filter { !placeholders.contains($0.id) }.map(\.id))
            for m in created {
                touchedThreads.insert(m.threadID)
                let at: Int64? = incremental.contains(m.id) ? m.sentAt : nil
                if at == nil { touchedMessages.insert(m.id) }
                keyUsers.append(m.sender)
                keyThreads.append(m.threadID)
                keyAt.append(at)
                for uid in m.mentions {
                    keyUsers.append(uid)
                    keyThreads.append(m.threadID)
                    keyAt.append(at)
                }
            }
            // Only a message seen for the first time is membership evidence (a republished one
            // with another time is not), and it changes something only for a sender who was not
            // already a member since before it: for an active member, nothing needs recomputing.
            let senders = fresh.filter { $0.conversation.groupID != nil }
            if let evidence = Self.evidenceQuery(senders, app: app) {
                for row in try prestored?.evidence ?? connection.query(evidence) {
                    evidenceGroups.append(try row.decode("g", as: String.self))
                    evidenceUsers.append(try row.decode("u", as: String.self))
                }
                // Membership changes touch every thread of the group: they need the group exclusively.
                var needed = LockSet()
                for group in evidenceGroups { needed.group(group) }
                let missing = held.missing(from: needed)
                if !missing.isEmpty { throw NeedsLocks(locks: missing) }
            }
        }
        var freshEditVersions: Set<[UInt8]> = []
        if !edits.isEmpty {
            freshEditVersions = try insertEdits(on: connection)
            for m in edits {
                touchedThreads.insert(m.threadID)
                touchedMessages.insert(m.id)
                for uid in m.mentions ?? [] {
                    keyUsers.append(uid)
                    keyThreads.append(m.threadID)
                    keyAt.append(nil)
                }
            }
        }
        // Versions exist now for created and edited messages: recompute the current text of the
        // messages that can have several (edited ones, and created ones whose edits came first;
        // a message inserted fresh has only its own, whose text the insert wrote).
        let textMessages = Set(edits.map(\.id)).union(filledPlaceholders)
        if !textMessages.isEmpty {
            try connection.send("""
                UPDATE messages m SET text = v.text
                  FROM (SELECT DISTINCT ON (message_id) message_id, text FROM message_versions
                         WHERE app = \(app) AND message_id = ANY (\(Array(textMessages))::text[]) AND text IS NOT NULL
                         ORDER BY message_id, at DESC) v
                 WHERE m.app = \(app) AND m.id = v.message_id AND m.text IS DISTINCT FROM v.text
                """)
        }
        // Facts filed under a reply's id before it was known to be a reply move to its root: its
        // subscribers are recomputed there and routed again from the earliest moved reply.
        var rehomeTriggers: [(uid: String, thread: String, at: Int64)] = []
        if !rehome.isEmpty {
            for row in try connection.query("SELECT r_uid, r_thread, r_at FROM herald_rehome(\(app), \(rehome.map(\.from)), \(rehome.map(\.to)), \(rehome.map(\.rootSender)))") {
                let uid = try row.decode("r_uid", as: String.self), thread = try row.decode("r_thread", as: String.self)
                keyUsers.append(uid)
                keyThreads.append(thread)
                keyAt.append(nil)
                if let at = try row.decode("r_at", as: Int64?.self) { rehomeTriggers.append((uid, thread, at)) }
            }
            for move in rehome { touchedThreads.insert(move.to) }
        }
        if !memberships.isEmpty {
            try connection.send("""
                INSERT INTO member_events (app, group_id, uid, at, joined)
                SELECT \(app), g, u, a, j FROM unnest(\(memberships.map(\.guid))::text[], \(memberships.map(\.uid))::text[], \(memberships.map(\.at))::bigint[], \(memberships.map(\.joined))::boolean[]) AS x(g, u, a, j)
                ON CONFLICT DO NOTHING
                """)
            for change in memberships {
                evidenceGroups.append(change.guid)
                evidenceUsers.append(change.uid)
            }
        }
        // Current membership: the latest join and removal evidence, from member events and senders.
        var summaryGroups: [String] = []
        var summaryUsers: [String] = []
        var summaryJoined: [Int64?] = []
        var summaryRemoved: [Int64?] = []
        for change in memberships {
            summaryGroups.append(change.guid)
            summaryUsers.append(change.uid)
            summaryJoined.append(change.joined ? change.at : nil)
            summaryRemoved.append(change.joined ? nil : change.at)
        }
        for m in fresh {
            guard let guid = m.conversation.groupID else { continue }
            summaryGroups.append(guid)
            summaryUsers.append(m.sender)
            summaryJoined.append(m.sentAt)
            summaryRemoved.append(nil)
        }
        // Who was a member before this batch, for the member events that change it (SPEC §11.3).
        let membersBefore = try MemberActionJobs.state(app: app, of: memberships, on: connection)
        if !summaryGroups.isEmpty {
            try connection.send("""
                INSERT INTO group_members AS g (app, group_id, uid, joined_at, removed_at)
                SELECT \(app), x.gid, x.uid, x.j, x.r
                  FROM (SELECT gid, uid, max(j) AS j, max(r) AS r
                          FROM unnest(\(summaryGroups)::text[], \(summaryUsers)::text[], \(summaryJoined)::bigint[], \(summaryRemoved)::bigint[]) AS x(gid, uid, j, r)
                         GROUP BY gid, uid) x
                 -- evidence the stored row covers already is left out before the insert: ON CONFLICT
                 -- DO UPDATE locks the row it meets even when its WHERE changes nothing, and a
                 -- sender's row stayed locked to the commit, for every message of an active member
                 -- (batches in other threads of the group waited on it). Both columns only grow
                 -- (greatest, here and in MembershipStore), so a row that covers it now always will.
                 WHERE NOT EXISTS (SELECT FROM group_members o
                                    WHERE o.app = \(app) AND o.group_id = x.gid AND o.uid = x.uid
                                      AND (o.joined_at, o.removed_at) IS NOT DISTINCT FROM
                                          (greatest(o.joined_at, x.j), greatest(o.removed_at, x.r)))
                 -- rows in one order: concurrent batches on other threads of the group lock them alike
                 ORDER BY x.gid COLLATE "C", x.uid COLLATE "C"
                ON CONFLICT (app, group_id, uid) DO UPDATE SET
                    joined_at = greatest(g.joined_at, EXCLUDED.joined_at),
                    removed_at = greatest(g.removed_at, EXCLUDED.removed_at)
                WHERE (g.joined_at, g.removed_at) IS DISTINCT FROM
                      (greatest(g.joined_at, EXCLUDED.joined_at), greatest(g.removed_at, EXCLUDED.removed_at))
                """)
        }
        var deletedGroupThreads: [String] = []
        if !groupDeletions.isEmpty {
            let rows = try connection.query("""
                WITH d AS (
                    INSERT INTO deleted_groups AS d (app, group_id, deleted_at)
                    SELECT \(app), g, a FROM unnest(\(Array(groupDeletions.keys))::text[], \(Array(groupDeletions.values))::bigint[]) AS x(g, a)
                    ON CONFLICT (app, group_id) DO UPDATE SET deleted_at = least(d.deleted_at, EXCLUDED.deleted_at)
                )
                SELECT parent_id FROM threads WHERE app = \(app) AND group_id = ANY (\(Array(groupDeletions.keys))::text[])
                """)
            deletedGroupThreads = try rows.map { try $0.decode(0, as: String.self) }
        }

        // Threads recomputed from their messages; the others only gained new replies.
        var recount = Set(deletedGroupThreads)
        for m in deletions.values { recount.insert(m.threadID) }
        for m in edits { recount.insert(m.threadID) }
        for m in created where m.parentID == nil { recount.insert(m.id) }
        for move in rehome { recount.insert(move.to) }
        try connection.send("SELECT herald_apply(\(app), \(keyUsers), \(keyThreads), \(keyAt), \(Array(touchedThreads) + deletedGroupThreads), \(Array(touchedMessages)), \(evidenceGroups), \(evidenceUsers), \(newReplies), \(deletedReplies), \(Array(recount)))")
        // A deleted message's jobs that no worker has claimed are cancelled (a parent's: its
        // replies' too; a deleted group's: all its messages'), found by message through the
        // jobs' unique key.
        if !deletions.isEmpty {
            try connection.send("""
                WITH doomed AS (SELECT ARRAY(SELECT unnest(\(deletions.values.map(\.id))::text[])
                                             UNION SELECT m.id FROM messages m WHERE m.app = \(app) AND m.parent_id = ANY (\(deletions.values.map(\.id))::text[])) AS ids),
                blocks AS (UPDATE job_blocks SET stop = claimed
                            WHERE app = \(app) AND message_id IN (SELECT unnest(ids) FROM doomed) AND claimed < stop)
                UPDATE job_rows SET state = 'cancelled', updated_at = herald_now_ms()
                 WHERE app = \(app) AND state = 'ready' AND message_id IN (SELECT unnest(ids) FROM doomed)
                """)
        }
        // Recipients who had already been pushed one of those messages get a retraction (SPEC §11.4).
        let retracted = try Retractions.make(app: app, deletions: deletions.compactMap { key, message in
            deletionEvents[key].map { Retractions.Deletion(event: $0, message: message) }
        }, appSettings: appSettings, on: connection)
        if !groupDeletions.isEmpty {
            try connection.send("""
                WITH doomed AS (SELECT ARRAY(SELECT m.id FROM messages m
                                              WHERE m.app = \(app) AND m.group_id = ANY (\(Array(groupDeletions.keys))::text[]) AND m.created_seen) AS ids),
                blocks AS (UPDATE job_blocks SET stop = claimed
                            WHERE app = \(app) AND message_id IN (SELECT unnest(ids) FROM doomed) AND claimed < stop)
                UPDATE job_rows SET state = 'cancelled', updated_at = herald_now_ms()
                 WHERE app = \(app) AND state = 'ready' AND message_id IN (SELECT unnest(ids) FROM doomed)
                """)
            // and its member actions' (which name no message)
            try connection.send("""
                UPDATE job_rows j SET state = 'cancelled', updated_at = herald_now_ms()
                  FROM member_actions a
                 WHERE a.app = \(app) AND a.group_id = ANY (\(Array(groupDeletions.keys))::text[])
                   AND j.app = \(app) AND j.message_id IS NULL AND j.kind = 'memberAction' AND j.state = 'ready'
                   AND j.event_source = a.event_source AND j.event_id = a.event_id
                """)
        }
        // Triggers of this batch that subscribe their users from a time before messages that were
        // routed already: those messages are routed again for them (SPEC §4). Found in the round
        // trip of the routing query (neither reads what the other writes: the catch-up leaves out
        // this batch's messages, whose jobs alone the routing writes).
        var triggers = rehomeTriggers
        for m in fresh {
            triggers.append((m.sender, m.threadID, m.sentAt))
            for uid in m.mentions { triggers.append((uid, m.threadID, m.sentAt)) }
            if let author = m.parentSender, m.parentID != nil { triggers.append((author, m.threadID, m.sentAt)) }
        }
        for m in edits { for uid in m.mentions ?? [] { triggers.append((uid, m.threadID, m.editedAt)) } }
        let catchUp = Fanout(app: app).catchUpQuery(triggers, excluding: fresh.map(\.id))
        // Jobs, after subscriptions and unread counts include this batch.
        let routed = try Fanout(app: app, jobsMayExist: jobsMayExist).run(fresh.compactMap { message in
            createdEvents[Array(message.id.utf8)].map { Fanout.Created(event: $0, message: message) }
        }, appSettings: appSettings, alongside: catchUp.map { [$0] } ?? [], on: connection)
        var produced = retracted + routed.produced
        if catchUp != nil {
            produced += try Fanout(app: app).catchUp(found: routed.found[0], appSettings: appSettings, on: connection)
        }
        let freshEdits = zip(editEvents, edits).filter { _, edit in
            freshEditVersions.contains(Array(edit.id.utf8) + [0] + Array(String(edit.editedAt).utf8))
        }.map { (event: $0.0, edit: $0.1) }
        produced += try Fanout(app: app, jobsMayExist: jobsMayExist).runEdits(freshEdits, appSettings: appSettings, on: connection)
        // Recipients already pushed an edited message get its new body (SPEC §11.4), after the
        // edits' mention jobs, which take their place for the newly mentioned.
        produced += try Updates.make(app: app, edits: freshEdits, appSettings: appSettings, on: connection)
        // Pins and saves (SPEC §12.1), after this batch's messages are stored (a system pin in a
        // one-on-one conversation takes the message's).
        if !pins.isEmpty { produced += try SyncJobs.make(app: app, try PinStore.apply(app: app, pins, on: connection), appSettings: appSettings,
                                                      on: connection) }
        // Reactions (SPEC §11.2), after this batch's messages and deletions are stored.
        produced += try ReactionJobs.apply(app: app, reactions, appSettings: appSettings, on: connection)
        // Member actions (SPEC §11.3): the events that changed membership, and every notice.
        var actions = memberNotices
        if !memberEvents.isEmpty {
            let membersAfter = try MemberActionJobs.state(app: app, of: memberships, on: connection)
            var sentBy: [[UInt8]: Int64] = [:]
            for m in fresh {
                guard let guid = m.conversation.groupID else { continue }
                let key = MemberActionJobs.key(group: guid, uid: m.sender)
                sentBy[key] = min(sentBy[key] ?? m.sentAt, m.sentAt)
            }
            actions = MemberActionJobs.changing(memberEvents, before: membersBefore, after: membersAfter, sentBy: sentBy) + actions
        }
        return try produced + MemberActionJobs.make(app: app, actions, appSettings: appSettings, on: connection)
    }

    /// What a round's first round trip stored already (`IngestStore.apply`, when every event of
    /// the round is a new message.created): the answer of `createdStatements`' insert of the
    /// messages, and the rows of its evidence query (nil: it had none).
    package struct Prestored {
        package let applied: PostgresRows
        package let evidence: PostgresRows?
    }

    /// `insertCreated`'s statements for when every message is new (none seen before, none filling
    /// a placeholder), for a caller that sends them ahead in one round trip: the messages' insert
    /// (its answer is `Prestored.applied`), their versions and mentions, then the membership
    /// evidence query (its rows are `Prestored.evidence`; `evidence`: its index, nil when no
    /// message is in a group). The caller checks `Self.applied` finds every message new, else it
    /// rolls back and writes the usual way.
    package func createdStatements() -> (statements: [SQL], evidence: Int?) {
        guard !created.isEmpty else { return ([], nil) }
        var statements = [messagesInsert()] + versionStatements(created)
        let evidence = Self.evidenceQuery(created.filter { $0.conversation.groupID != nil }, app: app)
        if let evidence { statements.append(evidence) }
        return (statements, evidence == nil ? nil : statements.count - 1)
    }

    /// Stores message.created facts; returns the messages whose creation was new.
    private func insertCreated(on connection: PostgresConnection) throws -> (fresh: [DomainEvent.MessageCreated], placeholders: [String]) {
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
                          \(created.map(\.quotedSender))::text[], \(created.map(\.sendNotification))::boolean[], \(created.map { createdEvents[Array($0.id.utf8)]!.source })::text[], \(created.map { createdEvents[Array($0.id.utf8)]!.id })::text[], \(created.map { createdEvents[Array($0.id.utf8)]!.type })::text[]) AS x
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
    package static func applied(_ rows: PostgresRows, of created: [DomainEvent.MessageCreated]) throws
        -> (fresh: [DomainEvent.MessageCreated], placeholders: [String]) {
        let appliedIDs = Set(try rows.map { try $0.decode("id", as: String.self) })
        let placeholders = try rows.filter { try $0.decode("updated", as: Bool.self) }.map { try $0.decode("id", as: String.self) }
        return (created.filter { appliedIDs.contains($0.id) }, placeholders)
    }

    /// The versions and mentions of messages whose creation is new.
    private func versionStatements(_ fresh: [DomainEvent.MessageCreated]) -> [SQL] {
        var statements = [Self.versionsInsert(app: app, ids: fresh.map(\.id), at: fresh.map(\.sentAt), mentions: fresh.map(\.mentions),
                                              mentionsAll: fresh.map(\.mentionsAll), texts: fresh.map(\.text))]
        var ids: [String] = [], at: [Int64] = [], uids: [String] = [], conversations: [String] = [], threads: [String] = []
        for message in fresh {
            for uid in message.mentions {
                ids.append(message.id); at.append(message.sentAt); uids.append(uid)
                conversations.append(message.conversation.id); threads.append(message.threadID)
            }
        }
        if let mentions = Self.mentionsInsert(app: app, ids: ids, at: at, uids: uids, conversations: conversations, threads: threads) {
            statements.append(mentions)
        }
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

    /// Stores edits; returns the (message id, time) keys of the versions that were new.
    private func insertEdits(on connection: PostgresConnection) throws -> Set<[UInt8]> {
        let e = edits
        // An edit seen before its message.created leaves a placeholder row with what it knows.
        try connection.send("""
            INSERT INTO messages (app, id, conversation_id, receiver_type, group_id, user_a, user_b, sender, parent_id)
            SELECT \(app), x.* FROM unnest(\(e.map(\.id))::text[], \(e.map(\.conversation.id))::text[], \(e.map(\.conversation.receiverType))::text[], \(e.map(\.conversation.groupID))::text[], \(e.map(\.conversation.userA))::text[], \(e.map(\.conversation.userB))::text[], \(e.map(\.sender))::text[],
                                       \(e.map(\.parentID))::text[]) AS x
            ON CONFLICT DO NOTHING
            """)
        // An edit that does not list mentions stores null: the mentions in force before it stay.
        // The version keeps the event that brought it, for the explain endpoint's `?event=`.
        let versions = try connection.query("""
            INSERT INTO message_versions (app, message_id, at, mentions, mentions_all, text, event_source, event_id)
            SELECT \(app), x.id, x.at,
                   CASE WHEN x.mentions IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(x.mentions::jsonb)) END,
                   x.mentions_all, x.text, x.source, x.event_id
              FROM unnest(\(e.map(\.id))::text[], \(e.map(\.editedAt))::bigint[], \(e.map { $0.mentions.map(Self.jsonArray) })::text[], \(e.map(\.mentionsAll))::boolean[], \(e.map(\.text))::text[], \(editEvents.map(\.source))::text[], \(editEvents.map(\.id))::text[])
                   AS x(id, at, mentions, mentions_all, text, source, event_id)
            ON CONFLICT DO NOTHING
            RETURNING message_id, at
            """)
        // Only a version seen for the first time notifies (not a republished edit).
        var fresh: Set<[UInt8]> = []
        for row in versions {
            fresh.insert(Array(try row.decode("message_id", as: String.self).utf8) + [0] + Array(String(try row.decode("at", as: Int64.self)).utf8))
        }
        var ids: [String] = [], at: [Int64] = [], uids: [String] = [], conversations: [String] = [], threads: [String] = []
        for edit in e {
            for uid in edit.mentions ?? [] {
                ids.append(edit.id); at.append(edit.editedAt); uids.append(uid)
                conversations.append(edit.conversation.id); threads.append(edit.threadID)
            }
        }
        try insertMentions(ids: ids, at: at, uids: uids, conversations: conversations, threads: threads, on: connection)
        return fresh
    }

    private static func versionsInsert(app: String, ids: [String], at: [Int64], mentions: [[String]], mentionsAll: [Bool],
                                       texts: [String?]) -> SQL {
        """
            INSERT INTO message_versions (app, message_id, at, mentions, mentions_all, text)
            SELECT \(app), x.id, x.at, ARRAY(SELECT jsonb_array_elements_text(x.mentions::jsonb)), x.mentions_all, x.text
              FROM unnest(\(ids)::text[], \(at)::bigint[], \(mentions.map(Self.jsonArray))::text[], \(mentionsAll)::boolean[], \(texts)::text[]) AS x(id, at, mentions, mentions_all, text)
            ON CONFLICT DO NOTHING
            """
    }

    private func insertMentions(ids: [String], at: [Int64], uids: [String], conversations: [String], threads: [String],
                                on connection: PostgresConnection) throws {
        guard let statement = Self.mentionsInsert(app: app, ids: ids, at: at, uids: uids, conversations: conversations, threads: threads) else { return }
        try connection.send(statement)
    }

    private static func mentionsInsert(app: String, ids: [String], at: [Int64], uids: [String], conversations: [String],
                                       threads: [String]) -> SQL? {
        guard !ids.isEmpty else { return nil }
        return """
            INSERT INTO mentions (app, message_id, at, uid, conversation_id, thread_id)
            SELECT \(app), x.* FROM unnest(\(ids)::text[], \(at)::bigint[], \(uids)::text[], \(conversations)::text[], \(threads)::text[]) AS x
            ON CONFLICT DO NOTHING
            """
    }

    /// Stores deletions (the earliest time wins); returns the replies that were live before.
    private func insertDeletions(on connection: PostgresConnection) throws -> [String] {
        let d = Array(deletions.values)
        let rows = try connection.query("""
            WITH input AS (
                SELECT * FROM unnest(\(d.map(\.id))::text[], \(d.map { $0.conversation?.id })::text[], \(d.map { $0.conversation?.receiverType })::text[], \(d.map { $0.conversation?.groupID })::text[], \(d.map(\.parentID))::text[], \(d.map(\.deletedAt))::bigint[])
                    AS x(id, conversation_id, receiver_type, group_id, parent_id, deleted_at)
            ),
            -- MATERIALIZED: read before `upsert` writes (Citus runs an inlined CTE after the insert)
            was_live AS MATERIALIZED (
                SELECT m.id FROM input i
                 CROSS JOIN LATERAL (SELECT * FROM messages m WHERE m.app = \(app) AND m.id = i.id OFFSET 0) m
                 WHERE m.created_seen AND m.deleted_at IS NULL AND m.parent_id IS NOT NULL
            ),
            upsert AS (
                INSERT INTO messages AS m (app, id, conversation_id, receiver_type, group_id, parent_id, deleted_at)
                SELECT \(app), i.* FROM input i
                ON CONFLICT (app, id) DO UPDATE
                    SET deleted_at = least(coalesce(m.deleted_at, EXCLUDED.deleted_at), EXCLUDED.deleted_at)
            )
            SELECT id FROM was_live
            """)
        return try rows.map { try $0.decode(0, as: String.self) }
    }

    package static func jsonArray(_ values: [String]) -> String {
        JSONValue.array(values.map { .string($0) }).jsonText
    }
}
