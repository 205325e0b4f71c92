import HeraldDomain
import Postgres

/// One kind of event's part of an ingest round (`FactWriter.write`), in the round's three steps:
/// `store` writes the kind's facts and notes in the round what they touch; the round then derives
/// threads, subscriptions, membership and inbox state from every kind's facts at once
/// (`IngestRound.derive`); `produce` makes the kind's jobs from that state. A new kind of event
/// is a new handler and a line in `FactWriter.write`.
protocol IngestHandler {
    /// Step 1: stores the facts of this kind's events of the batch; notes in `round` what they touch.
    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws
    /// Step 3, after `round.derive`: makes the jobs; returns how many were made.
    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int
}

extension IngestHandler {
    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int { 0 }
}

/// What one round's facts touch, as the handlers' `store` steps note it, and the derivation of
/// state from it: one statement per derived table, in one round trip with the next statement read.
struct IngestRound {
    let app: String
    /// The locks the round holds: a handler that finds it needs more throws `NeedsLocks`.
    let held: LockSet
    /// A try after a unique violation: jobs are inserted with ON CONFLICT.
    let jobsMayExist: Bool
    let settings: BatchSettings

    /// Threads whose rows and inbox columns are recomputed or counted anew.
    var touchedThreads: Set<String> = []
    /// Messages whose subscriptions' triggers are recomputed from their facts.
    var touchedMessages: Set<String> = []
    /// Subscription triggers (user, thread) and, for a message new in this round, its time (nil:
    /// recomputed from the facts).
    var keyUsers: [String] = []
    var keyThreads: [String] = []
    var keyAt: [Int64?] = []
    /// Membership evidence (group, user) whose subscriptions are recomputed.
    var evidenceGroups: [String] = []
    var evidenceUsers: [String] = []
    /// Current membership: the latest join and removal evidence, per (group, user).
    var summaryGroups: [String] = []
    var summaryUsers: [String] = []
    var summaryJoined: [Int64?] = []
    var summaryRemoved: [Int64?] = []
    /// Replies new in this round (counted as unread); replies live before this round and deleted in it.
    var newReplies: [String] = []
    var deletedReplies: [String] = []
    /// Threads recomputed from their messages (the others only gained new replies).
    var recount: Set<String> = []
    /// Messages whose current text is recomputed from their versions (several can exist).
    var textMessages: Set<String> = []
    /// Messages whose creation is new in this round (member actions read their senders' times).
    var fresh: [DomainEvent.MessageCreated] = []
    /// Late triggers that subscribe users from a time before messages routed already (SPEC §4):
    /// from facts moved to a reply's root, and from edits' mentions (the new messages' own are
    /// added by their handler).
    var movedTriggers: [(uid: String, thread: String, at: Int64)] = []
    var editTriggers: [(uid: String, thread: String, at: Int64)] = []

    init(app: String, held: LockSet, jobsMayExist: Bool, settings: BatchSettings) {
        self.app = app
        self.held = held
        self.jobsMayExist = jobsMayExist
        self.settings = settings
    }

    mutating func key(_ uid: String, thread: String, at: Int64?) {
        keyUsers.append(uid)
        keyThreads.append(thread)
        keyAt.append(at)
    }

    mutating func membership(group: String, uid: String, joined: Int64?, removed: Int64?) {
        summaryGroups.append(group)
        summaryUsers.append(uid)
        summaryJoined.append(joined)
        summaryRemoved.append(removed)
    }

    /// Step 2: the messages' current texts, current membership, then threads, subscriptions and
    /// inbox columns (`herald_apply`), from every handler's facts at once.
    func derive(on connection: PostgresConnection) throws {
        // Versions exist now for created and edited messages: the current text of the messages
        // that can have several (edited ones, and created ones whose edits came first; a message
        // inserted fresh has only its own, whose text the insert wrote).
        if !textMessages.isEmpty {
            try connection.send("""
                UPDATE messages m SET text = v.text
                  FROM (SELECT DISTINCT ON (message_id) message_id, text FROM message_versions
                         WHERE app = \(app) AND message_id = ANY (\(Array(textMessages))::text[]) AND text IS NOT NULL
                         ORDER BY message_id, at DESC) v
                 WHERE m.app = \(app) AND m.id = v.message_id AND m.text IS DISTINCT FROM v.text
                """)
        }
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
        try connection.send("SELECT herald_apply(\(app), \(keyUsers), \(keyThreads), \(keyAt), \(Array(touchedThreads)), \(Array(touchedMessages)), \(evidenceGroups), \(evidenceUsers), \(newReplies), \(deletedReplies), \(Array(recount)))")
    }
}
