import JSON

/// A job as the API shows it (SPEC §9), built when a worker claims it or lists dead jobs.
///
/// A `jobs` row holds only what differs between the recipients of one message (recipient,
/// reason, privacy, badge, its state); the title, body and data come from the message's row at
/// that moment. So a job costs one narrow row to write, and a job nobody has claimed yet shows
/// the message's current text after an edit (SPEC §11.4). The default and privacy templates live
/// here and nowhere else.
package struct JobPayload {
    package var id: Int64
    package var attempt: Int
    package var app: String
    package var recipient: String
    package var createdAt: Int64
    package var eventSource: String
    package var eventID: String
    package var eventType: String
    package var reason: String
    /// The recipient's devices when the job is read: at claim time (SPEC §13.1).
    package var devices: [Device.Target]
    package var privacy: Bool
    package var badge: Int
    package var messageID: String
    package var conversationID: String
    package var receiverType: String
    package var groupID: String?
    package var sender: String
    package var sentAt: Int64
    package var parentID: String?
    package var text: String
    package var lastError: String?
    /// `clear` (SPEC §13.2) or `retract` (SPEC §11.4), or nil: the message's notification
    /// (`message` or `reply`).
    package var removal: Removal?
    /// An `update` job (SPEC §11.4): the reason of the job it updates, whose template it uses.
    package var updates: String?
    /// The device that acted (a read's `deviceId`): left out of `devices`.
    package var excludeDevice: String?
    /// A `reaction` job's reaction (SPEC §11.2); also set on a reaction's retraction.
    package var reaction: Reaction?
    /// A `memberAction` job's action (SPEC §11.3).
    package var memberAction: MemberActionFacts?
    /// A `sync` job's change (SPEC §12.3).
    package var sync: Sync?
    /// The W3C trace of the event that produced the job, in its `data` (a push traced from the
    /// bus to the device); nil when the event had none.
    package var traceparent: String? = nil
    /// A `digest` job's held replies (SPEC §17).
    package var digest: Digest? = nil

    package init(id: Int64, attempt: Int, app: String, recipient: String, createdAt: Int64, eventSource: String, eventID: String, eventType: String, reason: String, devices: [Device.Target], privacy: Bool, badge: Int, messageID: String, conversationID: String, receiverType: String, groupID: String? = nil, sender: String, sentAt: Int64, parentID: String? = nil, text: String, lastError: String? = nil, removal: Removal? = nil, updates: String? = nil, excludeDevice: String? = nil, reaction: Reaction? = nil, memberAction: MemberActionFacts? = nil, sync: Sync? = nil, traceparent: String? = nil, digest: Digest? = nil) {
        self.id = id
        self.attempt = attempt
        self.app = app
        self.recipient = recipient
        self.createdAt = createdAt
        self.eventSource = eventSource
        self.eventID = eventID
        self.eventType = eventType
        self.reason = reason
        self.devices = devices
        self.privacy = privacy
        self.badge = badge
        self.messageID = messageID
        self.conversationID = conversationID
        self.receiverType = receiverType
        self.groupID = groupID
        self.sender = sender
        self.sentAt = sentAt
        self.parentID = parentID
        self.text = text
        self.lastError = lastError
        self.removal = removal
        self.updates = updates
        self.excludeDevice = excludeDevice
        self.reaction = reaction
        self.memberAction = memberAction
        self.sync = sync
        self.traceparent = traceparent
        self.digest = digest
    }
    /// A reply job that opened a digest window: its tag and collapse id are the thread.
    package var opensDigest = false
    /// The job this one was made from (`init(block:row:)`): the first job of its claimed range,
    /// whose message-wide fields it has unchanged; nil for a job read whole.
    package var source: Int64? = nil

    package struct Digest {
        package var count: Int
        /// The latest 100 held replies, oldest first.
        package var messageIDs: [String]
        /// Up to 5 distinct senders, latest first.
        package var senders: [String]

        package init(count: Int, messageIDs: [String], senders: [String]) {
            self.count = count
            self.messageIDs = messageIDs
            self.senders = senders
        }
    }

    package struct Sync {
        /// `messagePinned` … `conversationUnpinned` (also the job's reason).
        package var change: String
        package var conversationID: String?
        /// The pin's or save's time (0: unpinned, unsaved) and who pinned.
        package var at: Int64
        package var by: String?

        package init(change: String, conversationID: String?, at: Int64, by: String?) {
            self.change = change
            self.conversationID = conversationID
            self.at = at
            self.by = by
        }
    }

    package struct Reaction {
        package var id: String
        package var reactor: String
        package var emoji: String

        package init(id: String, reactor: String, emoji: String) {
            self.id = id
            self.reactor = reactor
            self.emoji = emoji
        }
    }

    package struct MemberActionFacts {
        package var action: MemberAction
        package var uid: String
        package var actor: String?
        package var scope: String?
        package var at: Int64

        package init(action: MemberAction, uid: String, actor: String?, scope: String?, at: Int64) {
            self.action = action
            self.uid = uid
            self.actor = actor
            self.scope = scope
            self.at = at
        }
    }

    /// APNs' limit on a payload; the `notification` and `data` of a job stay within it (SPEC §11:
    /// the text is cut, never the JSON).
    package static let maxPushBytes = 4096

    /// What a silent job removes from the recipient's devices: the notifications of replies read
    /// elsewhere (`clear`), or of a deleted message and its replies (`retract`).
    package struct Removal {
        package enum Kind: String { case clear, retract }
        package var kind: Kind
        package var collapseIds: [String]

        package init(kind: Kind, collapseIds: [String]) {
            self.kind = kind
            self.collapseIds = collapseIds
        }
    }


    /// `message` (top-level), `reply` (SPEC §9), `clear` (SPEC §13.2), `retract` or `update`
    /// (SPEC §11.4), `reaction` (SPEC §11.2) or `memberAction` (SPEC §11.3).
    package var kind: JobKind {
        if let removal { return removal.kind == .clear ? .clear : .retract }
        if digest != nil { return .digest }
        if sync != nil { return .sync }
        if updates != nil { return .update }
        if memberAction != nil { return .memberAction }
        if reaction != nil { return .reaction }
        return parentID == nil ? .message : .reply
    }

    /// `tag` and `collapseId`: the message id; a reaction's id; a member action's group.
    /// A digest's, and the reply that opened its window: the thread (SPEC §17).
    package var collapseID: String {
        if digest != nil || opensDigest { return parentID ?? messageID }
        return memberAction != nil ? groupID ?? "" : reaction?.id ?? messageID
    }

    /// Title and body from the default or the privacy template (uncut: see `push`).
    package var notification: (title: String, body: String) {
        if let action = memberAction {
            // SPEC §11.3's privacy text is the body; the title is the same label, naming nobody
            if privacy { return ("Group update", "Group update") }
            return (groupID ?? "", Self.body(of: action))
        }
        if let reaction {
            // SPEC §11.2's privacy text is the body; the title is the same label, naming nobody
            if privacy { return ("New reaction", "New reaction") }
            let whose = reason == Routing.Reason.reactionOnOwnMessage.rawValue ? "your message"
                : sender.isEmpty ? "a message" : "\(sender)'s message"
            return (groupID.map { "\(reaction.reactor) @ \($0)" } ?? reaction.reactor,
                    "\(reaction.reactor) reacted \(reaction.emoji) to \(whose)" + (text.isEmpty ? "" : ": \(text)"))
        }
        if let digest {
            // SPEC §17: the title a reply has, and how many replies with the last one's text
            if privacy { return ("New replies", "New replies") }
            let replies = digest.count == 1 ? "1 new reply" : "\(digest.count) new replies"
            return (groupID.map { "\(sender) @ \($0)" } ?? sender, text.isEmpty ? replies : "\(replies): \(text)")
        }
        let reason = updates ?? self.reason   // an update says what the job it updates said, with the new text
        if privacy {
            let mentioned = reason == "mention" || reason == "mentionAll"
            return (mentioned ? "New mention" : (parentID == nil ? "New message" : "New reply"),
                    mentioned ? "You were mentioned" : "You have a new message")
        }
        let title = groupID.map { "\(sender) @ \($0)" } ?? sender
        switch reason {
        case "mention": return (title, "\(sender) mentioned you: \(text)")
        case "mentionAll": return (title, "\(sender) mentioned everyone: \(text)")
        case "quote": return (title, "\(sender) quoted you: \(text)")
        default: return (title, text.isEmpty ? "\(sender) sent a message" : text)
        }
    }

    /// A member action's body (SPEC §11.3): `alice added bob`, or `bob was added` without an actor.
    package static func body(of action: MemberActionFacts) -> String {
        let subject = action.uid
        func acted(_ verb: String, passive: String) -> String {
            action.actor.map { "\($0) \(verb) \(subject)" } ?? "\(subject) was \(passive)"
        }
        switch action.action {
        case .joined: return "\(subject) joined"
        case .left: return "\(subject) left"
        case .added: return acted("added", passive: "added")
        case .kicked: return acted("removed", passive: "removed")
        case .banned: return acted("banned", passive: "banned")
        case .unbanned: return acted("unbanned", passive: "unbanned")
        case .scopeChanged:
            guard let scope = action.scope else {
                return action.actor.map { "\($0) changed \(subject)'s scope" } ?? "\(subject)'s scope was changed"
            }
            let role = scope == "admin" ? "an admin" : "a \(scope)"
            return action.actor.map { "\($0) made \(subject) \(role)" } ?? "\(subject) was made \(role)"
        }
    }

    /// At most the bytes a digest's ids and senders take in `data` (quotes and commas included).
    private var digestBytes: Int {
        guard let digest else { return 0 }
        var total = 0
        for item in digest.messageIDs { total += item.utf8.count + 3 }
        for item in digest.senders { total += item.utf8.count + 3 }
        return total
    }

    /// The title and body as sent: the body cut (at a character, ending in "…") so that the job's
    /// `notification` and `data` together stay within `maxPushBytes` of JSON.
    package var push: (title: String, body: String) {
        let (title, body, _) = pushFitting
        return (title, body)
    }

    /// `push`, and whether it may have cut the body: a body that may be cut depends on every
    /// byte of the push, the badge's digits included, so jobs that differ only in their badge
    /// may get different bodies.
    private var pushFitting: (title: String, body: String, maybeCut: Bool) {
        let (title, body) = notification
        // Most bodies are far from the limit: every byte of every field escaped at its worst (6)
        // and the JSON around them still fit.
        let fields = title.utf8.count + body.utf8.count + 3 * messageID.utf8.count + conversationID.utf8.count
            + sender.utf8.count + 2 * (groupID?.utf8.count ?? 0) + (parentID?.utf8.count ?? 0)
            + 2 * (reaction.map { $0.id.utf8.count + $0.reactor.utf8.count + $0.emoji.utf8.count } ?? 0)
            + (memberAction.map { $0.uid.utf8.count + ($0.actor?.utf8.count ?? 0) } ?? 0) + (traceparent?.utf8.count ?? 0)
            + digestBytes
        if fields * 6 + 512 <= Self.maxPushBytes { return (title, body, false) }
        var probe = JSONWriter()
        probe.object { writePush(to: &$0, title: title, body: "") }
        return (title, Self.cut(body, toEscapedBytes: Self.maxPushBytes - probe.text.utf8.count), true)
    }

    /// `text` whole when its JSON escape fits in `budget` bytes, else its longest prefix of whole
    /// characters that fits with "…" after it.
    package static func cut(_ text: String, toEscapedBytes budget: Int) -> String {
        func escaped<S: Sequence>(_ scalars: S) -> Int where S.Element == Unicode.Scalar {
            scalars.reduce(0) { $0 + JSONValue.escapedUTF8Count($1) }
        }
        if escaped(text.unicodeScalars) <= budget { return text }
        let room = budget - 3   // "…"
        var used = 0
        var end = text.startIndex
        for index in text.indices {
            let width = escaped(text[index].unicodeScalars)
            guard used + width <= room else { break }
            used += width
            end = text.index(after: index)
        }
        return room > 0 ? text[..<end] + "…" : ""
    }

    /// The job as its JSON object (`POST /v1/jobs/claim`); `withLastError` adds `lastError`
    /// (the dead-job list). Direct delivery leaves out `devices`, and for APNs `notification`
    /// (SPEC §13.4).
    package func write(to writer: inout JSONWriter, withLastError: Bool = false, withDevices: Bool = true, withNotification: Bool = true) {
        var runs: SharedRuns? = nil
        write(to: &writer, withLastError: withLastError, withDevices: withDevices, withNotification: withNotification, runs: &runs)
    }

    /// Jobs as a JSON array, each as `write(to:)` writes it, in fewer steps: the jobs of a
    /// claimed range (made from its first, `source`) have their message's fields alike, so the
    /// bytes of those fields are written once per range (and of the title and body once per
    /// reason and privacy) and copied into the others (W5: writing a claim's JSON was a quarter
    /// of Herald's CPU).
    package static func write(_ jobs: [JobPayload], to writer: inout JSONWriter) {
        // a range's jobs follow its first in id order
        var range: (first: Int64, runs: SharedRuns?) = (0, nil)
        writer.array { list in
            for job in jobs {
                guard job.sharesRuns else {
                    job.write(to: &list)
                    continue
                }
                let first = job.source ?? job.id
                if first != range.first { range = (first, SharedRuns()) }
                job.write(to: &list, withLastError: false, withDevices: true, withNotification: true, runs: &range.runs)
            }
        }
    }

    /// Whether the job's JSON is in parts that the jobs made from one first share: a message
    /// or reply notification, as the jobs of blocks are.
    private var sharesRuns: Bool {
        removal == nil && sync == nil && digest == nil && updates == nil && memberAction == nil && reaction == nil
    }

    /// What the jobs of one range write alike (`write(_:to:)`): the fields from `createdAt` to
    /// `kind`; by reason, privacy and window, the notification's fields before `badge`; `data`.
    private struct SharedRuns {
        var head: [UInt8]?
        var notifications: [NotificationKey: [UInt8]] = [:]
        var data: [UInt8]?
    }

    private struct NotificationKey: Hashable {
        var reason: String
        var privacy: Bool
        var opensDigest: Bool
    }

    /// Copies the bytes of `run` (fields written for an earlier job of the range), or writes
    /// the fields with `body` and keeps their bytes in `run`.
    private static func fields(_ run: inout [UInt8]?, in writer: inout JSONWriter, _ body: (inout JSONWriter) -> Void) {
        if let run { writer.fields(run) } else { run = writer.recordingFields(body) }
    }

    private func write(to writer: inout JSONWriter, withLastError: Bool, withDevices: Bool, withNotification: Bool,
                       runs: inout SharedRuns?) {
        writer.object { job in
            job.field("id", wireJobID(id))
            job.field("attempt", attempt)
            job.field("app", app)
            job.field("recipient", recipient)
            func head(_ job: inout JSONWriter) {
                job.field("createdAt", createdAt)
                job.field("event") { $0.object { event in
                    event.field("source", eventSource)
                    event.field("id", eventID)
                    event.field("type", eventType)
                } }
                job.field("kind", kind.rawValue)
            }
            if runs != nil { Self.fields(&runs!.head, in: &job, head) } else { head(&job) }
            job.field("reason", reason)
            if runs != nil, withNotification {
                // the same fields as `writePush` writes, in parts
                let key = NotificationKey(reason: reason, privacy: privacy, opensDigest: opensDigest)
                var run = runs!.notifications[key]
                var shareable = true
                job.field("notification") { $0.object { notification in
                    Self.fields(&run, in: &notification) { notification in
                        let (title, body, maybeCut) = pushFitting
                        writeNotificationHead(to: &notification, title: title, body: body)
                        shareable = !maybeCut   // a cut body is the job's own (its badge's digits count)
                    }
                    writeNotificationTail(to: &notification)
                } }
                runs!.notifications[key] = shareable ? run : nil
                Self.fields(&runs!.data, in: &job, writeData)
            } else {
                let (title, body) = removal == nil && sync == nil ? push : ("", "")
                writePush(to: &job, title: title, body: body, withNotification: withNotification)
            }
            job.field("excludeDevice", excludeDevice)
            if withDevices { job.field("devices", array: devices) }
            if withLastError { job.field("lastError", lastError) }
        }
    }

    /// The `notification` and `data` fields, into an object being written.
    package func writePush(to job: inout JSONWriter, title: String, body: String, withNotification: Bool = true) {
        if let sync {
            // Silent: what changed, and the state it left, for the user's other devices.
            if withNotification { job.field("notification", JSONValue.null) }
            job.field("data") { $0.object { data in
                data.field("change", sync.change)
                if sync.change.hasPrefix("conversation") {
                    data.field("conversationId", sync.conversationID)
                    data.field("pinnedAt", sync.at)
                    data.field("pinnedBy", sync.by)
                } else if sync.change.hasPrefix("messageSav") || sync.change.hasPrefix("messageUnsav") {
                    data.field("messageId", messageID)
                    data.field("savedAt", sync.at)
                } else {
                    data.field("messageId", messageID)
                    data.field("conversationId", sync.conversationID ?? (conversationID.isEmpty ? nil : conversationID))
                    data.field("pinnedAt", sync.at)
                    data.field("pinnedBy", sync.by)
                }
                writeTrace(to: &data)
            } }
            return
        }
        if let removal {
            // Silent: remove these notifications (a clear job: from the reader's other
            // devices, and set the badge).
            if withNotification { job.field("notification", JSONValue.null) }
            job.field("data") { $0.object { data in
                switch removal.kind {
                case .clear:
                    data.field("parentMessageId", messageID)
                    data.field("collapseIds") { $0.array(strings: removal.collapseIds) }
                    data.field("badge", badge)
                case .retract:
                    data.field("messageId", messageID)
                    data.field("parentMessageId", parentID)
                    data.field("collapseIds") { $0.array(strings: removal.collapseIds) }
                }
                writeTrace(to: &data)
            } }
            return
        }
        if withNotification {
            job.field("notification") { $0.object { notification in
                writeNotificationHead(to: &notification, title: title, body: body)
                writeNotificationTail(to: &notification)
            } }
        }
        writeData(to: &job)
    }

    /// The notification's fields that are the same for jobs of one message with the same
    /// reason, privacy and window: all but `badge` and `silent`.
    private func writeNotificationHead(to notification: inout JSONWriter, title: String, body: String) {
        notification.field("title", title)
        notification.field("body", body)
        notification.field("tag", collapseID)
        notification.field("collapseId", collapseID)
    }

    private func writeNotificationTail(to notification: inout JSONWriter) {
        notification.field("badge", badge)
        if updates != nil { notification.field("silent", true) }
    }

    /// The `data` field of a notification job (a message, reply, update, digest, reaction or
    /// member action).
    private func writeData(to job: inout JSONWriter) {
        job.field("data") { $0.object { data in
            if let action = memberAction {
                data.field("conversationId", conversationID)
                data.field("receiverType", receiverType)
                data.field("receiver", groupID)
                data.field("action", action.action.rawValue)
                data.field("uid", action.uid)
                data.field("actor", action.actor)
                data.field("scope", action.scope)
                data.field("at", action.at)
                writeTrace(to: &data)
                return
            }
            data.field("messageId", messageID)
            data.field("parentMessageId", parentID)
            data.field("conversationId", conversationID)
            data.field("receiverType", receiverType)
            data.field("receiver", groupID ?? reaction?.reactor ?? sender)
            data.field("sender", sender)
            data.field("sentAt", sentAt)
            if let digest {
                data.field("count", digest.count)
                data.field("messageIds") { $0.array(strings: digest.messageIDs) }
                data.field("senders") { $0.array(strings: digest.senders) }
            }
            if let reaction {
                data.field("reactionId", reaction.id)
                data.field("reaction", reaction.emoji)
                data.field("reactor", reaction.reactor)
            }
            writeTrace(to: &data)
        } }
    }

    /// `traceparent` in `data`, only when the job's event had one.
    private func writeTrace(to data: inout JSONWriter) {
        if let traceparent { data.field("traceparent", traceparent) }
    }
}


extension JobPayload {
    /// The strings of a JSON array (`array_to_json(…)::text` of a text[] column); none for NULL.
    package static func strings(_ text: String?) throws -> [String] {
        guard let text, case .array(let items) = try JSONParser.parse(Array(text.utf8)) else { return [] }
        return items.compactMap { if case .string(let value) = $0 { value } else { nil } }
    }
}

extension JobPayload: JSONWritable {
    package func write(to writer: inout JSONWriter) { write(to: &writer, withLastError: false) }
}

/// A dead job as `GET /v1/jobs/dead` lists it: the job with its last error.
package struct DeadJob: JSONWritable {
    package let job: JobPayload

    package init(job: JobPayload) {
        self.job = job
    }
    package func write(to writer: inout JSONWriter) { job.write(to: &writer, withLastError: true) }
}

/// A job id on the wire: `j<number>`.
package func wireJobID(_ id: Int64) -> String { "j\(id)" }
