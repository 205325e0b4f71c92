import HeraldDomain
import Dispatch
import Postgres
import Synchronization

/// Produces the jobs of large-group messages outside the request (SPEC §8.3), on a thread of its
/// own: a task is leased, then worked a chunk of members at a time; each chunk commits its jobs
/// together with the task's cursor. A worker that dies loses its lease, and whoever takes the
/// task next resumes from the last committed chunk; jobs stay one per (event, recipient).
package final class FanoutWorker: Sendable {
    package let database: PostgresPool
    package let logger: Logger
    package let metrics: Metrics
    package let leaseSeconds: Int
    package let chunkSize: Int
    private let loop = BackgroundLoop(label: "herald.fanout")

    package init(database: PostgresPool, logger: Logger, metrics: Metrics, leaseSeconds: Int = 60, chunkSize: Int = 1000) {
        self.database = database
        self.logger = logger
        self.metrics = metrics
        self.leaseSeconds = leaseSeconds
        self.chunkSize = chunkSize
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "fanout" }
    /// The chunk in progress finishes first.
    package var shutdownTimeoutSeconds: Double? { 30 }

    /// Works the tasks until `shutdown()`; every error a task meets is logged and the task looked
    /// at again later (its lease runs out), so only a shutdown ends it.
    package func run() {
        loop.run { [self] in
            do {
                if try runTask() { return .again }
            } catch let error as PostgresError where error.isUnavailable || error.code == .poolClosed {
                // the database is away (readiness reports it): look again later
            } catch {
                logger.error("fan-out failed", ["error": .string(String(describing: error))])
            }
            // Idle: until ingest wakes it, or a second (other instances' tasks, leases that ran out).
            return .idle(seconds: 1)
        }
    }

    /// Asks the worker to look for tasks now.
    package func wake() { loop.wake() }

    /// Asks `run()` to return after the chunk in progress.
    package func shutdown() { loop.shutdown() }

    /// Leases one task and works it to the end; false when there was none.
    @discardableResult
    package func runTask() throws -> Bool {
        // Candidates of any app first, read without a lock; then one leased by a conditional
        // update of that app's row, which another instance's lease makes match nothing. (On Citus
        // a locking read across apps is refused: each app's rows are on their own worker.)
        let rows = try database.withConnection { connection -> PostgresRows? in
            let candidates = try connection.query("""
                SELECT app, id FROM fanout_tasks
                 WHERE NOT done AND (lease_until IS NULL OR lease_until < herald_now_ms())
                 ORDER BY id LIMIT 8
                """)
            for candidate in candidates {
                let leased = try connection.query("""
                    UPDATE fanout_tasks SET lease_until = herald_now_ms() + \(leaseSeconds)::bigint * 1000, updated_at = herald_now_ms()
                     WHERE app = \(try candidate.decode("app", as: String.self)) AND id = \(try candidate.decode("id", as: Int64.self))
                       AND NOT done AND (lease_until IS NULL OR lease_until < herald_now_ms())
                    RETURNING app, id, event_source, event_id, event_type, message_id, subject_id, after_uid
                    """)
                if !leased.isEmpty { return leased }
            }
            return nil
        }
        guard let row = rows?.first else { return false }
        let app = try row.decode("app", as: String.self)
        let taskID = try row.decode("id", as: Int64.self)
        let event = IncomingEvent(source: try row.decode("event_source"), id: try row.decode("event_id"), type: try row.decode("event_type"), event: .noEffect)
        // A message's task names the message; a reaction's its message and reaction; a member
        // action's its group (SPEC §11).
        let messageID = try row.decode("message_id", as: String?.self) ?? ""
        let subjectID = try row.decode("subject_id", as: String?.self) ?? ""
        let kind: Kind = switch event.type {
        case "reaction.added": .reaction
        case "message.pinned", "message.unpinned", "conversation.pinned", "conversation.unpinned": .sync
        case let type where type.hasPrefix("member."): .memberAction
        default: .message
        }
        var after = try row.decode("after_uid", as: String?.self)
        let started = monotonicNanoseconds()
        var chunks = 0
        while !loop.isStopping {
            var produced = 0
            // Under the thread's lock, as ingest: a deletion cannot slip past this chunk, and a
            // message that moved to its root's thread meanwhile (herald_rehome) is worked under
            // both threads' locks, taken together (LockSet.holding).
            let done = try database.withConnection { connection in
                try LockSet.holding(app: app, on: connection, resolve: { connection in
                    var locks = LockSet()
                    guard kind == .message || kind == .reaction,
                          let (thread, group) = try StoredMessage.thread(app: app, id: messageID, on: connection)
                            ?? StoredMessage.reactionThread(app: app, reaction: subjectID, on: connection) else { return ("", locks) }
                    locks.thread(thread, group: group)
                    return (thread, locks)
                }) { _, connection -> Bool in
                    // Fencing: the chunk counts only if the task is still where this worker left it.
                    let current = try connection.query(
                        "SELECT after_uid, done FROM fanout_tasks WHERE app = \(app) AND id = \(taskID) FOR UPDATE")
                    guard let state = current.first, try state.decode("done", as: Bool.self) == false,
                          try state.decode("after_uid", as: String?.self) == after else { return true }
                    let settings = try PreferenceStore().settings(app: app, on: connection)
                    // a chunk judges the quiet rules when it runs (its task was made for an event
                    // that was not stale when applied)
                    let now = currentTimeMilliseconds()
                    let last: String?, count: Int
                    switch kind {
                    case .message:
                        guard let message = try StoredMessage.load(app: app, id: messageID, on: connection) else {
                            try connection.query("UPDATE fanout_tasks SET done = true, updated_at = herald_now_ms() WHERE app = \(app) AND id = \(taskID)")
                            return true // deleted meanwhile: nothing to notify
                        }
                        let chunk = try Fanout(app: app, jobsMayExist: false).produce([Fanout.Created(event: event, message: message)], settings: settings, now: now,
                                                                                       after: after, limit: chunkSize, on: connection)
                        (last, count) = (chunk.last, chunk.produced)
                    case .reaction:
                        // a reaction removed, or its message deleted, meanwhile yields no candidates: done
                        (last, count) = try ReactionJobs.produce(app: app, [(event, subjectID)], settings: settings, now: now, after: after,
                                                                 limit: chunkSize, on: connection)
                    case .memberAction:
                        (last, count) = try MemberActionJobs.produce(app: app, [event], settings: settings, now: now, after: after,
                                                                     limit: chunkSize, on: connection)
                    case .sync:
                        let message = messageID.isEmpty ? nil : messageID
                        guard let change = try SyncJobs.stored(app: app, event: event, messageID: message, group: subjectID,
                                                               on: connection) else { (last, count) = (nil, 0); break }
                        (last, count) = try SyncJobs.produce(app: app, [(change, subjectID)], after: after, limit: chunkSize, settings: settings, now: now,
                                                             on: connection)
                    }
                    try connection.query("""
                        UPDATE fanout_tasks SET after_uid = coalesce(\(last), after_uid), done = \(last == nil),
                                                lease_until = herald_now_ms() + \(leaseSeconds)::bigint * 1000, updated_at = herald_now_ms()
                         WHERE app = \(app) AND id = \(taskID)
                        """)
                    after = last ?? after
                    produced = count
                    return last == nil
                }
            }
            metrics.add(.jobsProduced, produced)
            chunks += 1
            if done { break }
        }
        logger.info("fan-out task done", ["app": .string(app), "task": .int(Int(taskID)), "chunks": .int(chunks),
                                           "durationMs": .double(Double(monotonicNanoseconds() - started) / 1_000_000)])
        return true
    }
}

extension FanoutWorker {
    /// What a task fans out.
    package enum Kind { case message, reaction, memberAction, sync }
}

/// A stored message as the fan-out needs it.
package enum StoredMessage {
    /// The thread and group of a reaction whose message Herald has not seen.
    package static func reactionThread(app: String, reaction: String, on connection: PostgresConnection) throws -> (thread: String, group: String?)? {
        guard let row = try connection.query("SELECT coalesce(parent_id, message_id) AS thread_id, group_id FROM reactions WHERE app = \(app) AND id = \(reaction)").first else { return nil }
        return (try row.decode("thread_id", as: String.self), try row.decode("group_id", as: String?.self))
    }

    package static func thread(app: String, id: String, on connection: PostgresConnection) throws -> (thread: String, group: String?)? {
        guard let row = try connection.query("SELECT coalesce(parent_id, id) AS thread_id, group_id FROM messages WHERE app = \(app) AND id = \(id)").first else { return nil }
        return (try row.decode("thread_id", as: String.self), try row.decode("group_id", as: String?.self))
    }

    /// The message, unless it or its thread was deleted.
    package static func load(app: String, id: String, on connection: PostgresConnection) throws -> DomainEvent.MessageCreated? {
        let rows = try connection.query("""
            SELECT m.sender, m.group_id, m.user_a, m.user_b, m.parent_id, m.sent_at, m.category, m.text, m.mentions_all,
                   m.quoted_sender, m.send_notification
              FROM messages m
             WHERE m.app = \(app) AND m.id = \(id) AND \(Visibility.live(app: app))
            """)
        guard let row = rows.first else { return nil }
        return try DomainEvent.MessageCreated(row: row, id: id)
    }
}
