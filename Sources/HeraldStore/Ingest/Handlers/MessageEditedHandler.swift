import HeraldDomain
import Postgres

/// message.edited (SPEC §8.1, §11.4): each edit is a version of its message (a placeholder row
/// when the edit comes first) with its mentions; the message's text and subscriptions are
/// recomputed; a version seen for the first time notifies the users it newly mentions
/// (`Fanout.runEdits`) and updates what was pushed (`Updates.make`).
struct MessageEditedHandler: IngestHandler {
    let app: String
    private var edits: [(event: IncomingEvent, edit: DomainEvent.MessageEdited)] = []
    /// The (message id, time) keys of the versions that were new.
    private var freshVersions: Set<[UInt8]> = []

    init(app: String) { self.app = app }

    mutating func add(_ edit: DomainEvent.MessageEdited, event: IncomingEvent) {
        edits.append((event, edit))
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !edits.isEmpty else { return }
        let e = edits.map(\.edit)
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
              FROM unnest(\(e.map(\.id))::text[], \(e.map(\.editedAt))::bigint[], \(e.map { $0.mentions.map(MessageCreatedHandler.jsonArray) })::text[], \(e.map(\.mentionsAll))::boolean[], \(e.map(\.text))::text[], \(edits.map(\.event.source))::text[], \(edits.map(\.event.id))::text[])
                   AS x(id, at, mentions, mentions_all, text, source, event_id)
            ON CONFLICT DO NOTHING
            RETURNING message_id, at
            """)
        // Only a version seen for the first time notifies (not a republished edit).
        for row in versions {
            freshVersions.insert(Array(try row.decode("message_id", as: String.self).utf8) + [0] + Array(String(try row.decode("at", as: Int64.self)).utf8))
        }
        var mentions = MentionRows()
        for edit in e {
            for uid in edit.mentions ?? [] {
                mentions.add(message: edit.id, at: edit.editedAt, uid: uid, conversation: edit.conversation.id, thread: edit.threadID)
            }
        }
        if let insert = mentions.insert(app: app) { try connection.send(insert) }
        for m in e {
            round.touchedThreads.insert(m.threadID)
            round.recount.insert(m.threadID)
            round.touchedMessages.insert(m.id)
            round.textMessages.insert(m.id)
            for uid in m.mentions ?? [] {
                round.key(uid, thread: m.threadID, at: nil)
                round.editTriggers.append((uid, m.threadID, m.editedAt))
            }
        }
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        let fresh = edits.filter { freshVersions.contains(Array($0.edit.id.utf8) + [0] + Array(String($0.edit.editedAt).utf8)) }
        var produced = try Fanout(app: app, jobsMayExist: round.jobsMayExist).runEdits(fresh, appSettings: round.settings, on: connection)
        // Recipients already pushed an edited message get its new body (SPEC §11.4), after the
        // edits' mention jobs, which take their place for the newly mentioned.
        produced += try Updates.make(app: app, edits: fresh, appSettings: round.settings, on: connection)
        return produced
    }
}

/// Facts filed under a reply's id before it was known to be a reply (SPEC §1: threads do not
/// nest) move to its root when its creation is new in this round (`herald_rehome`), after the
/// round's messages and edits are stored: its subscribers are recomputed there, and the
/// messages routed from the earliest moved reply are routed again for them (the catch-up).
struct RehomeHandler: IngestHandler {
    let moves: [Rehoming]

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !moves.isEmpty else { return }
        let app = round.app
        for row in try connection.query("SELECT r_uid, r_thread, r_at FROM herald_rehome(\(app), \(moves.map(\.from)), \(moves.map(\.to)), \(moves.map(\.rootSender)))") {
            let uid = try row.decode("r_uid", as: String.self), thread = try row.decode("r_thread", as: String.self)
            round.key(uid, thread: thread, at: nil)
            if let at = try row.decode("r_at", as: Int64?.self) { round.movedTriggers.append((uid, thread, at)) }
        }
        for move in moves {
            round.touchedThreads.insert(move.to)
            round.recount.insert(move.to)
        }
    }
}
