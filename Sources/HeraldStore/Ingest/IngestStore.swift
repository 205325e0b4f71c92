import HeraldDomain
import Postgres
import JSON

/// Applies a request's events in one transaction (two when some of its threads are busy:
/// `apply`) with a fixed number of set-based statements, whatever the batch size: lock the
/// conversations, record the events for dedupe, store the facts, then recompute the derived
/// threads and subscriptions they touch.
package struct IngestStore: Sendable {
    package enum Status: String, Sendable {
        case accepted, duplicate, rejected
    }

    package struct Outcome: Sendable {
        package let status: Status
        package let source: String?
        package let id: String?
        package let error: EventRejection?
    }

    package init() {}

    /// Applies `items` for `app`; returns one outcome per item, in order, and the count of jobs
    /// produced. Everything accepted is committed before this returns. Each event's effects
    /// commit together (SPEC §4), usually the whole batch's in one transaction: when another
    /// transaction holds some of the batch's threads, the events it does not touch go first and
    /// the others follow in a transaction of their own once those locks are free (`waitForAll`
    /// false: the batch's other events do not wait for them). On an error the events of a
    /// committed first part stay applied; the bus's redelivery finds them duplicates.
    package func apply(_ items: [EventParser.Item], app: String, on connection: PostgresConnection,
                       waitForAll: Bool = false) throws -> (outcomes: [Outcome], jobsProduced: Int) {
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
        // the events left for a transaction of their own: their locks were held by another
        var later: [(index: Int, event: IncomingEvent)] = []
        // inside a caller's transaction the first part could not commit on its own
        var waitForAll = waitForAll || connection.inTransaction
        // A round of new messages only (the usual one) stores them in its first round trip after
        // the locks, before it knows they are new and filed under the right threads; when that
        // guess is wrong the transaction is rolled back and run again the usual way (not inside a
        // caller's transaction, which could not roll back this part alone).
        var speculate = rejected.isEmpty && !connection.inTransaction && original.allSatisfy {
            if case .messageCreated = $0.event.event { return true } else { return false }
        }
        var attempt = 0
        while attempt < 4 {
            defer { attempt += 1 }
            outcomes = firstOutcomes
            // a try that failed at its COMMIT (a queued statement's error) had counted its jobs
            jobsProduced = 0
            later = []
            do {
                try connection.withTransaction { connection in
                    if !rejected.isEmpty { try recordRejections(rejected, app: app, on: connection) }
                    guard !original.isEmpty else { return }
                    // Edits and deletions without parentId take their thread from what is stored, so
                    // that the first locks are usually the right ones.
                    let first = try resolveThreads(original, app: app, parents: false, on: connection).resolved.events
                    var held = lockSet(first.map(\.event))
                    held.formUnion(extra)
                    // this transaction's events: all of them, or those whose locks were free
                    var original = original
                    if attempt == 0 && !waitForAll && rejected.isEmpty && separable(first.map(\.event)) {
                        // Several threads: take those free now; the events of the others wait for
                        // them after this commits (waiting here, holding the rest, could deadlock).
                        // (A batch with rejected events stays whole: they are recorded with its
                        // one transaction, never again by a redelivery after a failed second part.)
                        let missed = try held.lockFree(app: app, on: connection, genericPlans: true)
                        if !missed.isEmpty {
                            let waiting = waitingEvents(first, missed: missed)
                            // none is free of them: wait for all of them in a transaction of its own
                            guard waiting.count < original.count else { throw WaitForLocks() }
                            later = original.filter { waiting.contains($0.index) }
                            original.removeAll { waiting.contains($0.index) }
                            held = held.restricted(to: held.keys.subtracting(missed))
                        }
                    } else {
                        try held.lock(app: app, on: connection, genericPlans: true)
                    }
                    // Under the locks, in one round trip with the locks: every message filed under its
                    // thread's root (a parent that is a reply, a reply stored meanwhile), the events
                    // recorded for dedupe (filing changes no event's source, id or type) and the app's
                    // settings. A thread learned only now is locked from the start of another try, so
                    // that all locks are still taken in one order (the events' rows go with this try).
                    // Speculating: the messages' facts go in this round trip too, as if every event
                    // were new and filed under the thread it names (`FactWriter.createdStatements`).
                    let ahead = speculate ? FactWriter(app: app, events: original.map(\.event)) : nil
                    let stored: (statements: [SQL], evidence: Int?) = ahead?.createdStatements() ?? ([], nil)
                    // Herald's time of applying these events, taken as the transaction asks for
                    // their locks (queued with the next statement: before any wait for them) and
                    // from this host's clock: stored as their `received_at` and the time their
                    // jobs are judged at (staleness, quiet rules), so that explain, which reads it
                    // back, judges the same (SPEC §11.5).
                    let appliedAt = currentTimeMilliseconds()
                    let (resolved, found) = try resolveThreads(original, app: app, parents: true, on: connection, alongside: [
                        """
                        INSERT INTO events (app, source, id, type, traceparent, received_at)
                        SELECT \(app), s, i, t, tp, \(appliedAt) FROM unnest(\(original.map(\.event.source))::text[], \(original.map(\.event.id))::text[], \(original.map(\.event.type))::text[], \(original.map(\.event.traceparent))::text[]) AS x(s, i, t, tp)
                         -- in one order: two batches redelivering the same events wait, never deadlock
                         ORDER BY s COLLATE "C", i COLLATE "C"
                        ON CONFLICT DO NOTHING
                        RETURNING source, id
                        """,
                        PreferenceStore.settingsQuery(app: app),
                    ] + stored.statements)
                    var prestored: FactWriter.Prestored?
                    if let ahead {
                        // right only if no event was seen before, no thread changed and every
                        // message's creation was new (not a republish, not a placeholder's)
                        let (fresh, placeholders) = try FactWriter.applied(found[2], of: ahead.created)
                        guard !resolved.moved, found[0].count == original.count, fresh.count == ahead.created.count,
                              placeholders.isEmpty else { throw Misguessed() }
                        prestored = FactWriter.Prestored(applied: found[2], evidence: stored.evidence.map { found[2 + $0] })
                    }
                    let working = resolved.events
                    let learned = held.missing(from: lockSet(working.map(\.event)))
                    if !learned.isEmpty { throw NeedsLocks(locks: learned, groups: false) }
                    let fresh = found[0]
                    let settings = BatchSettings(app: app, on: connection, appliedAt: appliedAt, loaded: try PreferenceStore.settings(from: found[1]))
                    var isNew: Set<[UInt8]> = []
                    for row in fresh {
                        isNew.insert(Array(try row.decode("source", as: String.self).utf8) + [0] + Array(try row.decode("id", as: String.self).utf8))
                    }
                    var accepted: [IncomingEvent] = []
                    for (index, event) in working {
                        let new = isNew.contains(Array(event.source.utf8) + [0] + Array(event.id.utf8))
                        outcomes[index] = Outcome(status: new ? .accepted : .duplicate, source: event.source, id: event.id, error: nil)
                        if new { accepted.append(event) }
                    }
                    if !accepted.isEmpty {
                        // a reply moves what was filed under its id only when its creation is new here
                        let acceptedIDs = Set(accepted.compactMap { event -> [UInt8]? in
                            guard case .messageCreated(let m) = event.event else { return nil }
                            return Array(m.id.utf8)
                        })
                        let rehome = resolved.rehome.filter { acceptedIDs.contains(Array($0.from.utf8)) }
                        let writer = FactWriter(app: app, events: accepted, rehome: rehome)
                        jobsProduced = try writer.write(holding: held, jobsMayExist: jobsMayExist, settings: settings,
                                                        prestored: prestored, on: connection)
                    }
                }
                break
            } catch is WaitForLocks {
                waitForAll = true
                attempt -= 1
            } catch is Misguessed {
                speculate = false
                attempt -= 1
            } catch let error as PostgresError where error.isTransient && speculate {
                // What a round stores ahead is written under the locks of the threads its events
                // name; when one was filed elsewhere, another round holding the real thread may be
                // writing the same messages, and PostgreSQL breaks the deadlock by failing one of
                // the two. That round runs again the usual way.
                speculate = false
                attempt -= 1
            } catch let needed as NeedsLocks where attempt < 3 {
                // Evidence can appear between tries (other batches' mentions commit): the next try
                // holds every group of the batch exclusively, so it cannot miss one.
                extra.formUnion(needed.locks)
                for (_, event) in original where needed.groups {
                    if case .messageCreated(let m) = event.event, let group = m.conversation.groupID { extra.group(group) }
                }
            } catch let error as PostgresError where error.isUniqueViolation && !jobsMayExist && attempt < 3 {
                // A job that was thought new exists: run again inserting with ON CONFLICT.
                jobsMayExist = true
            }
        }
        if !later.isEmpty {
            let rest = try apply(later.map { items[$0.index] }, app: app, on: connection, waitForAll: true)
            for (position, (index, _)) in later.enumerated() { outcomes[index] = rest.outcomes[position] }
            jobsProduced += rest.jobsProduced
        }
        return (outcomes.map { $0! }, jobsProduced)
    }

    /// The batch's events grouped by the locks they share (a thread's, a reply's own id's, a
    /// group's), each event's group as the index of its first event: what one event of a group
    /// does may depend on another's (a reply to a reply, a mention beside its group's sender
    /// evidence, a member event beside a message of its group), never on another group's.
    func lockGroups(_ events: [IncomingEvent]) -> [Int] {
        var parent = Array(events.indices)
        func root(_ i: Int) -> Int {
            var i = i
            while parent[i] != i { parent[i] = parent[parent[i]]; i = parent[i] }
            return i
        }
        var owner: [String: Int] = [:]
        for (i, event) in events.enumerated() {
            for key in lockSet([event]).keys {
                if let other = owner[key] { parent[root(i)] = root(other) } else { owner[key] = i }
            }
        }
        return events.indices.map(root)
    }

    /// Whether a batch may be applied in parts (`apply`): its events fall in more than one lock
    /// group, and none of them takes no lock while naming a message (a pin or a save, which
    /// would otherwise go first whatever it names).
    func separable(_ events: [IncomingEvent]) -> Bool {
        for event in events where lockSet([event]).isEmpty {
            if case .noEffect = event.event { continue }
            return false
        }
        return Set(lockGroups(events.filter { !lockSet([$0]).isEmpty })).count > 1
    }

    /// The indexes of the events that must wait for `missed`: every event of a lock group in
    /// which one needs a missed lock, so that what goes first never needed what waits: the
    /// batch is applied as two deliveries of it would be, each whole.
    func waitingEvents(_ events: [(index: Int, event: IncomingEvent)], missed: Set<String>) -> Set<Int> {
        let groups = lockGroups(events.map(\.event))
        let waiting = Set(events.indices.filter { !lockSet([events[$0].event]).keys.isDisjoint(with: missed) }.map { groups[$0] })
        return Set(events.indices.filter { waiting.contains(groups[$0]) }.map { events[$0].index })
    }

    /// Thrown inside the first transaction of a batch when every event needs a lock another
    /// transaction holds: the transaction ends (releasing what it took) and the batch runs again
    /// waiting for its locks.
    private struct WaitForLocks: Error {}

    /// Thrown when what a round stored ahead (`speculate` in `apply`) was not right: an event seen
    /// before, a message filed under another thread or created before. The transaction rolls
    /// back and the round runs again the usual way.
    private struct Misguessed: Error {}

    /// Files each message event under its thread's root (SPEC §1: threads do not nest).
    /// - An edit or deletion without `parentId` takes the parent stored for its message (a
    ///   message's thread never changes once known).
    /// - With `parents`, a parent that is itself a reply (stored, or created in this batch) is
    ///   replaced by that reply's root, with the root's author; and a reply of this batch under
    ///   whose id earlier messages or subscriptions were filed (they came before it, when it was
    ///   not known to be a reply) is returned in `rehome`, so that the writer moves them to its root.
    /// `alongside`: statements run in the same round trip as the first look-up, after it; their
    /// rows are returned in `found`, in order. `moved`: whether any event was filed under another
    /// thread than it names, or the look-up found a stored reply or a thread under a reply's id.
    package func resolveThreads(_ candidates: [(index: Int, event: IncomingEvent)], app: String, parents: Bool,
                                on connection: PostgresConnection, alongside: [SQL] = [])
        throws -> (resolved: (events: [(index: Int, event: IncomingEvent)], rehome: [Rehoming], moved: Bool), found: [PostgresRows]) {
        var lookup: [String] = []
        var hosts: [String] = []
        // the replies created in this batch: id → (parent, parent's author)
        var batch: [[UInt8]: (parent: String, sender: String?)] = [:]
        for (_, event) in candidates {
            guard let message = event.message else { continue }
            if let parent = message.parentID {
                guard parents else { continue }
                lookup.append(parent)
                if case .messageCreated(let m) = event.event {
                    hosts.append(m.id)
                    if batch[Array(m.id.utf8)] == nil { batch[Array(m.id.utf8)] = (parent, m.parentSender) }
                }
            } else if event.needsThreadResolution {
                lookup.append(message.id)
            }
        }
        guard !lookup.isEmpty || !hosts.isEmpty else { return ((candidates, [], false), try connection.pipeline(alongside)) }
        var stored: [[UInt8]: (parent: String, sender: String?)] = [:]
        var hosting: Set<[UInt8]> = []
        let answers = try connection.pipeline([Self.threadLookup(app: app, lookup: lookup, hosts: hosts)] + alongside)
        for row in answers[0] {
            let id = Array(try row.decode("id", as: String.self).utf8)
            if let parent = try row.decode("parent_id", as: String?.self) {
                stored[id] = (parent, try row.decode("parent_sender", as: String?.self))
            } else {
                hosting.insert(id)
            }
        }
        // A stored parent is usually a root; not always (a placeholder left by an edit or deletion
        // that named a reply before that reply was known to be one): follow such parents up.
        var looked = Set(lookup.map { Array($0.utf8) })
        for _ in 0..<8 {
            let next = Set(stored.values.map(\.parent).filter { looked.insert(Array($0.utf8)).inserted && batch[Array($0.utf8)] == nil })
            guard !next.isEmpty else { break }
            for row in try connection.query(Self.storedReplies(app: app, ids: Array(next))) {
                stored[Array(try row.decode("id", as: String.self).utf8)] =
                    (try row.decode("parent_id", as: String.self), try row.decode("parent_sender", as: String?.self))
            }
        }
        // Follows parents to the root (a stored reply's parent is a root already; replies of this
        // batch may chain). Bounded, so a cycle in hostile input ends.
        func root(of parent: String) -> (id: String, sender: String?)? {
            var current = parent
            var sender: String?
            var moved = false
            for _ in 0..<16 {
                guard let next = stored[Array(current.utf8)] ?? batch[Array(current.utf8)], next.parent != current else { break }
                (current, sender, moved) = (next.parent, next.sender, true)
            }
            return moved ? (current, sender) : nil
        }
        var moved = !stored.isEmpty || !hosting.isEmpty
        let events = candidates.map { candidate -> (index: Int, event: IncomingEvent) in
            guard let message = candidate.event.message else { return candidate }
            if let parent = message.parentID {
                guard let resolved = root(of: parent), resolved.id != message.id else { return candidate }
                moved = true
                return (candidate.index, candidate.event.inThread(resolved.id, rootSender: resolved.sender))
            }
            guard candidate.event.needsThreadResolution, let known = stored[Array(message.id.utf8)] else { return candidate }
            moved = true
            return (candidate.index, candidate.event.inThread(known.parent, rootSender: nil))
        }
        var rehome: [Rehoming] = []
        var seen: Set<[UInt8]> = []
        for (_, event) in events {
            guard case .messageCreated(let m) = event.event, let parent = m.parentID,
                  hosting.contains(Array(m.id.utf8)), seen.insert(Array(m.id.utf8)).inserted else { continue }
            rehome.append(Rehoming(from: m.id, to: parent, rootSender: m.parentSender))
        }
        // `moved`: an event filed elsewhere, or the look-up found what may move facts
        return ((events, rehome, moved), Array(answers.dropFirst()))
    }

    /// `resolveThreads`' look-up: the stored replies among `lookup` (their parents and parents'
    /// authors), then, with null parents, which of `hosts` have a thread row (replies were
    /// counted there, and subscriptions may be filed there). Placeholders of replies not yet
    /// created (an edit or deletion first) make no thread row; their creation files them anew.
    /// Each row through its key, in any plan (`MigrationTests.threadLookup`).
    package static func threadLookup(app: String, lookup: [String], hosts: [String]) -> SQL {
        """
        \(storedReplies(app: app, ids: lookup))
        UNION ALL
        -- OFFSET 0: a generic plan with `parent_id = ANY (…)` read the app's every thread by its
        -- app alone and filtered them (W1: 8 ms a batch with 5,000 threads)
        SELECT t.parent_id, NULL, NULL FROM unnest(\(hosts)::text[]) AS h(id)
         CROSS JOIN LATERAL (SELECT t.parent_id FROM threads t WHERE t.app = \(app) AND t.parent_id = h.id OFFSET 0) t
        """
    }

    /// The stored replies among `ids`: id, parent and parent's author, each through its key. Not
    /// `id = ANY (…) AND parent_id IS NOT NULL`: that qualified the partial index of replies, whose
    /// statistics, gathered while it was empty, made it look empty, and the app's every reply was
    /// read for each batch (W1).
    static func storedReplies(app: String, ids: [String]) -> SQL {
        """
        SELECT m.id, m.parent_id, m.parent_sender FROM (SELECT DISTINCT unnest(\(ids)::text[]) AS id) x
         CROSS JOIN LATERAL (SELECT m.id, m.parent_id, m.parent_sender FROM messages m WHERE m.app = \(app) AND m.id = x.id OFFSET 0) m
         WHERE m.parent_id IS NOT NULL
        """
    }

    /// The locks a batch needs (see `LockSet`): each message's thread, each membership change's group.
    package func lockSet(_ events: [IncomingEvent]) -> LockSet {
        var locks = LockSet()
        for event in events {
            switch event.event {
            case .messageCreated(let m):
                locks.thread(m.threadID, group: m.conversation.groupID)
                // a reply's own id too: replies that named it as parent before it was known to be
                // a reply were filed under it, and move to its root with it (`RehomeHandler`)
                if m.parentID != nil { locks.thread(m.id, group: m.conversation.groupID) }
            case .messageEdited(let m): locks.thread(m.threadID, group: m.conversation.groupID)
            case .messageDeleted(let m): locks.thread(m.threadID, group: m.conversation?.groupID)
            case .membership(let change), .memberNotice(let change): locks.group(change.guid)
            case .groupDeleted(let guid, _): locks.group(guid)
            // a reaction's jobs are decided under its message's thread lock: a deletion of the
            // message cannot slip between them (its jobs are cancelled with the message's)
            case .reaction(let r):
                locks.thread(r.threadID, group: r.conversation.groupID)
                // and its message's own id: two events of one reaction, one naming the parent and
                // one not (for a message not seen yet), lock different threads, but this one alike
                locks.thread(r.messageID, group: r.conversation.groupID)
            // pins and saves are rows decided by their latest event, serialised by the row itself
            case .messagePin, .messageSave, .conversationPin, .noEffect: break
            }
        }
        return locks
    }

    /// Keeps what is known of each rejected event for `GET /v1/events/rejected`. PostgreSQL's text
    /// and jsonb cannot hold U+0000, which a rejected event may well contain (in its id, source or
    /// type too: that is why it was rejected), so the stored copy shows U+FFFD in its place.
    package func recordRejections(_ rejected: [(EventRejection, String?, String?, String?, JSONValue)], app: String,
                          on connection: PostgresConnection) throws {
        func storable(_ text: String?) -> String? {
            guard let text, text.unicodeScalars.contains("\u{0}") else { return text }
            return String(String.UnicodeScalarView(text.unicodeScalars.map { $0 == "\u{0}" ? "\u{FFFD}" : $0 }))
        }
        func storable(_ json: JSONValue) -> String { json.jsonText.replacing("\\u0000", with: "\\ufffd") }
        try connection.send("""
            INSERT INTO rejected_events (app, source, id, type, error, event)
            SELECT \(app), s, i, t, e::jsonb, r::jsonb
              FROM unnest(\(rejected.map { storable($0.1) })::text[], \(rejected.map { storable($0.2) })::text[], \(rejected.map { storable($0.3) })::text[], \(rejected.map { storable($0.0.errorJSON) })::text[], \(rejected.map { storable($0.4) })::text[]) WITH ORDINALITY AS x(s, i, t, e, r, n)
             ORDER BY n
            """)
    }
}

extension IncomingEvent {
    /// An edit or deletion that did not say which thread its message is in.
    package var needsThreadResolution: Bool {
        switch event {
        case .messageEdited(let m): return m.parentID == nil
        case .messageDeleted(let m): return m.parentID == nil
        case .reaction(let r): return r.parentID == nil
        default: return false
        }
    }
}

extension IngestStore {
    /// The app's rejected events before the sequence number `before` (nil: from the newest),
    /// newest first, at most `limit`: each row its sequence number and its JSON.
    package static func rejected(app: String, before: Int64?, limit: Int, on connection: PostgresConnection) throws -> PostgresRows {
        try connection.query("""
            SELECT seq, jsonb_build_object('id', id, 'source', source, 'type', type, 'error', error,
                                           'receivedAt', received_at, 'event', event)::text
              FROM rejected_events
             WHERE app = \(app) AND (\(before)::bigint IS NULL OR seq < \(before))
             ORDER BY seq DESC LIMIT \(limit)
            """)
    }
}
