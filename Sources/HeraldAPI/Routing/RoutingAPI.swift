import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §8.2: `GET /v1/users/{uid}/messages/{messageId}/routing` — why a user did or did not get
/// a push for a message (server role).
package enum RoutingAPI {
    /// Its handlers use the database only.
    package typealias Context = RequestContext<DatabaseServices>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/users/{uid}/messages/{messageId}/routing", Route(access: .server, handler: explain))
    }

    package static func explain(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let messageID = try Identifier.validate(context.parameter("messageId"), field: "messageId")
        let app = context.app
        // `?event=<source>/<id>` picks one of the message's events (SPEC §11): its creation, an
        // edit of it, or a reaction to it. Sources and ids may hold '/', so the text is matched whole.
        let event = context.request.query["event"]
        if let event, event.isEmpty || event.utf8.count > 513 {
            throw HTTPError.badRequest("event must be <source>/<id>", params: ["field": "event"])
        }
        let explanation = try context.services.database.withConnection { connection -> RoutingExplanation in
            if let event, let reaction = try explainReaction(app: app, uid: uid, messageID: messageID, event: event, on: connection) {
                return reaction
            }
            if let event, let edit = try explainEdit(app: app, uid: uid, messageID: messageID, event: event, on: connection) {
                return edit
            }
            let rows = try ExplainInputs.message(app: app, uid: uid, messageID: messageID, on: connection)
            guard let row = rows.first else {
                throw HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND", message: "no such message, or it was deleted",
                                params: ["field": "messageId"])
            }
            if let event, event != (try row.decode("event_source", as: String?.self) ?? "") + "/" + (try row.decode("event_id", as: String?.self) ?? "") {
                throw HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND", message: "the message has no such event (its creation, an edit, or a reaction to it)",
                                params: ["field": "event"])
            }
            let message = try DomainEvent.MessageCreated(row: row, id: messageID)
            let settings = try PreferenceStore().settings(app: app, on: connection)
            // As of the message, as its fan-out judged it (SPEC §4).
            let subscription = try Routing.SubscriptionState(row: row, asOf: message.sentAt)
            var input = Fanout.input(message, recipient: uid, try RecipientRow(row, settings: settings), subscription: subscription,
                                     mentionedExplicitly: try row.decode("mentioned"), settings: settings, now: currentTimeMilliseconds())
            input.hasAccess = try row.decode("has_access", as: Bool.self)
            if let appliedAt = try row.decode("applied_at", as: Int64?.self) {
                input.age = settings.age(of: message.sentAt, appliedAt: appliedAt)
            }
            let decision = Routing.decide(input)
            var steps = decision.steps
            var notified = decision.notified
            var reason = decision.code
            var jobID: String?
            if let (id, jobReason) = try producedJob(row) {
                steps.insert("job \(id) was produced when the message arrived (reason \(jobReason)); the steps below are evaluated now", at: 0)
                notified = true
                reason = jobReason
                jobID = id
            } else if case .notified(let routed) = decision.outcome, Routing.isDigestible(routed, isReply: input.isReply),
                      let digest = try DigestExplanation(row) {
                // SPEC §17: held for the recipient's digest of the thread
                steps.append(digest.step)
                (notified, reason, jobID) = (digest.notified, digest.reason, digest.jobID)
            } else if decision.notified {
                steps.insert("no job was produced when the message arrived (it predates a preference change, or a large-group fan-out is still running); the steps below are evaluated now", at: 0)
            }
            return RoutingExplanation(notified: notified, reason: reason, jobID: jobID, steps: steps)
        }
        return .json(explanation)
    }
}

extension RoutingAPI {
    /// The job the decision produced, from an explain query's `job` column
    /// (`{"id", "reason"}` as text), if there was one.
    package static func producedJob(_ row: PostgresRow) throws -> (id: String, reason: String)? {
        guard let text = try row.decode("job", as: String?.self), let job = try? JSONParser.parse(Array(text.utf8)),
              case .string(let id)? = job["id"], case .string(let reason)? = job["reason"] else { return nil }
        return (id, reason)
    }

    /// The decision for `uid` of the edit of `messageID` whose message.edited is `event`
    /// (`<source>/<id>`), as its jobs were decided (`Fanout.runEdits`, then `Updates.make`); nil
    /// when no version of the message came from that event. The job the event made for the user
    /// answers when there is one: a newly mentioned user's mention job, or the update of a push
    /// they already had (SPEC §11.4); else the decision says why not.
    package static func explainEdit(app: String, uid: String, messageID: String, event: String,
                            on connection: PostgresConnection) throws -> RoutingExplanation? {
        let rows = try ExplainInputs.edit(app: app, uid: uid, messageID: messageID, event: event, on: connection)
        guard let row = rows.first else { return nil }
        let editedAt = try row.decode("edited_at", as: Int64.self)
        // the edit as Fanout.runEdits routes it: the message at the edit's time
        let message = try DomainEvent.MessageCreated(row: row, id: messageID, at: editedAt)
        let settings = try PreferenceStore().settings(app: app, on: connection)
        let subscription = try Routing.SubscriptionState(row: row, asOf: editedAt)
        var input = Fanout.input(message, recipient: uid, try RecipientRow(row, settings: settings), subscription: subscription,
                                 mentionedExplicitly: try row.decode("newly_mentioned"), settings: settings, now: currentTimeMilliseconds())
        input.isEdit = true
        input.hasAccess = try row.decode("has_access", as: Bool.self)
        if let appliedAt = try row.decode("applied_at", as: Int64?.self) {
            input.age = settings.age(of: editedAt, appliedAt: appliedAt)
        }
        let decision = Routing.decide(input)
        var steps = decision.steps
        var notified = decision.notified
        var reason = decision.code
        var jobID: String?
        if let (id, jobReason) = try producedJob(row) {
            steps.insert(jobReason == "edited"
                ? "job \(id) updates with the new text a push of the message the recipient already had (reason edited); the steps below are evaluated now"
                : "job \(id) was produced when the edit arrived (reason \(jobReason)); the steps below are evaluated now", at: 0)
            notified = true
            reason = jobReason
            jobID = id
        } else if decision.notified {
            steps.insert("no job was produced when the edit arrived (it predates a preference change); the steps below are evaluated now", at: 0)
        }
        return RoutingExplanation(notified: notified, reason: reason, jobID: jobID, steps: steps)
    }

    /// The decision for `uid` of the reaction to `messageID` whose reaction.added is `event`
    /// (`<source>/<id>`), as its jobs were decided (`ReactionJobs.produce`); nil when no
    /// reaction to the message has that event.
    package static func explainReaction(app: String, uid: String, messageID: String, event: String,
                                on connection: PostgresConnection) throws -> RoutingExplanation? {
        let rows = try ExplainInputs.reaction(app: app, uid: uid, messageID: messageID, event: event, on: connection)
        guard let row = rows.first else { return nil }
        // as without `event`: a deleted message (or thread, or group) has nothing to explain
        if try row.decode("deleted", as: Bool.self) {
            throw HTTPError(status: 404, code: "ERR_MESSAGE_ID_NOT_FOUND", message: "no such message, or it was deleted",
                            params: ["field": "messageId"])
        }
        let settings = try PreferenceStore().settings(app: app, on: connection)
        let type: Routing.ConversationType = try row.decode("group_id", as: String?.self) == nil ? .oneOnOne : .group
        let text = try row.decode("preferences", as: String?.self)
        var cache = EventJobs.PreferenceCache(settings: settings, now: currentTimeMilliseconds())
        let addedAt = try row.decode("added_at", as: Int64.self)
        var input = Routing.ReactionInput()
        input.common = cache.common(text, type: type, mutedUntil: try row.decode("muted_until"))
        input.common.isActor = try row.decode("reactor", as: String.self) == uid
        input.common.hasAccess = try row.decode("has_access")
        if let appliedAt = try row.decode("applied_at", as: Int64?.self) {
            input.common.age = settings.age(of: addedAt, appliedAt: appliedAt)
        }
        input.reactions = cache.effective(text).conversation(type).reactions
        input.wroteMessage = try row.decode("author", as: String?.self) == uid
        input.onReply = try row.decode("parent_id", as: String?.self) != nil
        input.subscription = try Routing.SubscriptionState(row: row, judgedAt: addedAt)
        let decision = Routing.decide(input)
        var steps = decision.steps
        var notified = decision.notified
        var reason = decision.code
        var jobID: String?
        let removed = try row.decode("removed_at", as: Int64?.self) != nil
        if removed { steps.insert("the reaction was removed: its unclaimed jobs were cancelled", at: 0) }
        if let (id, jobReason) = try producedJob(row) {
            steps.insert("job \(id) was produced when the reaction arrived (reason \(jobReason)); the steps below are evaluated now", at: 0)
            notified = true
            reason = jobReason
            jobID = id
        } else if removed {
            notified = false
        } else if decision.notified {
            steps.insert("no job was produced when the reaction arrived (it predates a preference change, it was removed first, or a large-group fan-out is still running); the steps below are evaluated now", at: 0)
        }
        return RoutingExplanation(notified: notified, reason: reason, jobID: jobID, steps: steps)
    }
}

/// What became of a reply held for the recipient's thread digest (SPEC §17), from the window
/// that held it (`ExplainInputs.digestColumn`, in an explain query over the message `m`, the user `uid` and the
/// message's `applied_at`).
package struct DigestExplanation {

    package let notified: Bool
    package let reason: String
    package let jobID: String?
    package let step: String

    /// Nil when no window held the message for the user.
    package init?(_ row: PostgresRow) throws {
        guard let text = try row.decode("digest", as: String?.self), let window = try? JSONParser.parse(Array(text.utf8)) else { return nil }
        let ends: Int64 = if case .int(let value)? = window["ends"] { Int64(value) } else { 0 }
        guard case .bool(true)? = window["closed"] else {
            (notified, reason, jobID) = (false, Routing.Skip.digestPending.rawValue, nil)
            step = "held for the recipient's digest of the thread: its window ends at \(ends)"
            return
        }
        if case .string("sent")? = window["outcome"], case .bool(true)? = window["included"], case .int(let job)? = window["job"] {
            let jobReason: String = if case .string(let name)? = window["reason"] { name } else { "" }
            (notified, reason, jobID) = (true, jobReason, wireJobID(Int64(job)))
            step = "held for the recipient's digest of the thread: digest job \(wireJobID(Int64(job))) at the window's end (\(ends)) included it"
            return
        }
        let outcome: String = if case .string(let name)? = window["outcome"], name != "sent" { name } else { Routing.Skip.read.rawValue }
        (notified, reason, jobID) = (false, outcome, nil)
        step = outcome == Routing.Skip.read.rawValue
            ? "held for the recipient's digest of the thread: read or deleted before the window ended (\(ends))"
            : "held for the recipient's digest of the thread: at the window's end (\(ends)) \(outcome) applied, and nothing was sent"
    }
}

/// `GET …/messages/{messageId}/routing` (SPEC §8.2): the decision and its steps.
package struct RoutingExplanation: JSONWritable {
    package let notified: Bool
    /// The job's reason when notified, else the skip code.
    package let reason: String
    package let jobID: String?
    package let steps: [String]

    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("notified", notified)
            body.field("reason", reason)
            body.field("jobId", jobID)
            body.field("steps") { $0.array(strings: steps) }
        }
    }
}
