import HTTPServer
import Postgres

/// Applies a request's events in one transaction with a fixed number of set-based statements,
/// whatever the batch size: lock the conversations, record the events for dedupe, store the
/// facts, then recompute the derived threads and subscriptions they touch.
public struct IngestStore: Sendable {
    public enum Status: String, Sendable {
        case accepted, duplicate, rejected
    }

    public struct Outcome: Sendable {
        public let status: Status
        public let source: String?
        public let id: String?
        public let error: EventRejection?
    }

    public init() {}

    /// Applies `items` for `app`; returns one outcome per item, in order, and the count of jobs
    /// produced. Everything accepted is committed before this returns; on an error nothing is.
    public func apply(_ items: [EventParser.Item], app: String,
                      on connection: PostgresConnection) throws -> (outcomes: [Outcome], jobsProduced: Int) {
        // Same (source, id) twice in one request: the first counts, the others are duplicates.
        // Keys compare as bytes, as PostgreSQL does (Swift's == would merge canonically equal text).
        var firstIndex: [[UInt8]: Int] = [:]
        var original: [(index: Int, event: IncomingEvent)] = []
        var outcomes: [Outcome?] = Array(repeating: nil, count: items.count)
        var rejected: [(EventRejection, String?, String?, String?, JSONValue)] = []
        for (index, item) in items.enumerated() {
            switch item {
            case .valid(let event, _):
                let key = Array(event.source.utf8) + [0] + Array(event.id.utf8)
                if firstIndex[key] == nil {
                    firstIndex[key] = index
                    original.append((index, event))
                } else {
                    outcomes[index] = Outcome(status: .duplicate, source: event.source, id: event.id, error: nil)
                }
            case .rejected(let rejection, let source, let id, let type, let raw):
                outcomes[index] = Outcome(status: .rejected, source: source, id: id, error: rejection)
                rejected.append((rejection, source, id, type, raw))
            }
        }

        var jobsProduced = 0
        // Locks found missing on the way (membership evidence under a shared group lock) are
        // taken from the start on the next try.
        var extra = LockSet()
        var jobsMayExist = false
        let firstOutcomes = outcomes
        for attempt in 0..<3 {
            outcomes = firstOutcomes
            do {
                try connection.withTransaction { connection in
                    if !rejected.isEmpty { try recordRejections(rejected, app: app, on: connection) }
                    guard !original.isEmpty else { return }
                    var working = try resolveThreads(original, app: app, on: connection)
                    var held = lockSet(working.map(\.event))
                    held.formUnion(extra)
                    try held.lock(app: app, on: connection, genericPlans: true)
                    // Edits and deletions without parentId: resolve again under the locks (a reply may have
                    // arrived meanwhile) and lock a thread learned only now.
                    if original.contains(where: { $0.event.needsThreadResolution }) {
                        working = try resolveThreads(original, app: app, on: connection)
                        let learned = held.missing(from: lockSet(working.map(\.event)))
                        if !learned.isEmpty {
                            try learned.lock(app: app, on: connection)
                            held.formUnion(learned)
                        }
                    }
                    let fresh = try connection.query("""
                        INSERT INTO events (app, source, id, type)
                        SELECT $1, s, i, t FROM unnest($2::text[], $3::text[], $4::text[]) AS x(s, i, t)
                         -- in one order: two batches redelivering the same events wait, never deadlock
                         ORDER BY s COLLATE "C", i COLLATE "C"
                        ON CONFLICT DO NOTHING
                        RETURNING source, id
                        """, [app, working.map(\.event.source), working.map(\.event.id), working.map(\.event.type)])
                    var isNew: Set<[UInt8]> = []
                    for row in fresh {
                        isNew.insert(Array(try row.decode(0, as: String.self).utf8) + [0] + Array(try row.decode(1, as: String.self).utf8))
                    }
                    var accepted: [IncomingEvent] = []
                    for (index, event) in working {
                        let new = isNew.contains(Array(event.source.utf8) + [0] + Array(event.id.utf8))
                        outcomes[index] = Outcome(status: new ? .accepted : .duplicate, source: event.source, id: event.id, error: nil)
                        if new { accepted.append(event) }
                    }
                    if !accepted.isEmpty {
                        jobsProduced = try FactWriter(app: app, events: accepted).write(holding: held, jobsMayExist: jobsMayExist,
                                                                                         on: connection)
                    }
                }
                break
            } catch let needed as NeedsLocks where attempt < 2 {
                // Evidence can appear between tries (other batches' mentions commit): the next try
                // holds every group of the batch exclusively, so it cannot miss one.
                extra.formUnion(needed.locks)
                for (_, event) in original {
                    if case .messageCreated(let m) = event.event, let group = m.conversation.groupID { extra.group(group) }
                }
            } catch let error as PostgresError where error.sqlState == "23505" && !jobsMayExist && attempt < 2 {
                // A job that was thought new exists: run again inserting with ON CONFLICT.
                jobsMayExist = true
            }
        }
        return (outcomes.map { $0! }, jobsProduced)
    }

    /// Edits and deletions may leave out `parentId`: a reply's thread is then taken from what is
    /// already stored (a message's parent never changes), so they act on the right thread.
    func resolveThreads(_ candidates: [(index: Int, event: IncomingEvent)], app: String,
                        on connection: PostgresConnection) throws -> [(index: Int, event: IncomingEvent)] {
        var unknown: [String] = []
        for (_, event) in candidates where event.needsThreadResolution {
            switch event.event {
            case .messageEdited(let m): unknown.append(m.id)
            case .messageDeleted(let m): unknown.append(m.id)
            default: break
            }
        }
        guard !unknown.isEmpty else { return candidates }
        var parents: [[UInt8]: String] = [:]
        for row in try connection.query(
            "SELECT id, parent_id FROM messages WHERE app = $1 AND id = ANY ($2::text[]) AND parent_id IS NOT NULL", [app, unknown]) {
            parents[Array(try row.decode(0, as: String.self).utf8)] = try row.decode(1, as: String.self)
        }
        return candidates.map { candidate in
            let event = candidate.event
            switch event.event {
            case .messageEdited(let m) where m.parentID == nil:
                guard let parent = parents[Array(m.id.utf8)] else { return candidate }
                return (candidate.index, IncomingEvent(source: event.source, id: event.id, type: event.type, event: .messageEdited(.init(
                    id: m.id, sender: m.sender, conversation: m.conversation, parentID: parent, editedAt: m.editedAt,
                    text: m.text, mentions: m.mentions, mentionsAll: m.mentionsAll))))
            case .messageDeleted(let m) where m.parentID == nil:
                guard let parent = parents[Array(m.id.utf8)] else { return candidate }
                return (candidate.index, IncomingEvent(source: event.source, id: event.id, type: event.type, event: .messageDeleted(.init(
                    id: m.id, conversation: m.conversation, parentID: parent, deletedAt: m.deletedAt))))
            default:
                return candidate
            }
        }
    }

    /// The locks a batch needs (see `LockSet`): each message's thread, each membership change's group.
    func lockSet(_ events: [IncomingEvent]) -> LockSet {
        var locks = LockSet()
        for event in events {
            switch event.event {
            case .messageCreated(let m): locks.thread(m.threadID, group: m.conversation.groupID)
            case .messageEdited(let m): locks.thread(m.threadID, group: m.conversation.groupID)
            case .messageDeleted(let m): locks.thread(m.threadID, group: m.conversation?.groupID)
            case .membership(let change): locks.group(change.guid)
            case .groupDeleted(let guid, _): locks.group(guid)
            case .noEffect: break
            }
        }
        return locks
    }

    /// Keeps what is known of each rejected event for `GET /v1/events/rejected`. PostgreSQL's text
    /// and jsonb cannot hold U+0000, which a rejected event may well contain (in its id, source or
    /// type too: that is why it was rejected), so the stored copy shows U+FFFD in its place.
    func recordRejections(_ rejected: [(EventRejection, String?, String?, String?, JSONValue)], app: String,
                          on connection: PostgresConnection) throws {
        func storable(_ text: String?) -> String? {
            guard let text, text.unicodeScalars.contains("\u{0}") else { return text }
            return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\u{0}" ? "\u{FFFD}" : $0 }))
        }
        func storable(_ json: JSONValue) -> String { json.jsonText.replacing("\\u0000", with: "\\ufffd") }
        try connection.query("""
            INSERT INTO rejected_events (app, source, id, type, error, event)
            SELECT $1, s, i, t, e::jsonb, r::jsonb
              FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS x(s, i, t, e, r, n)
             ORDER BY n
            """, [app, rejected.map { storable($0.1) }, rejected.map { storable($0.2) }, rejected.map { storable($0.3) },
                  rejected.map { storable($0.0.errorJSON) }, rejected.map { storable($0.4) }])
    }
}

extension IncomingEvent {
    /// An edit or deletion that did not say which thread its message is in.
    var needsThreadResolution: Bool {
        switch event {
        case .messageEdited(let m): return m.parentID == nil
        case .messageDeleted(let m): return m.parentID == nil
        default: return false
        }
    }
}
