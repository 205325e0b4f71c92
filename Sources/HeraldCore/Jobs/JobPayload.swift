import Postgres
import JSON

/// A job as the API shows it (SPEC §9), built when a worker claims it or lists dead jobs.
///
/// A `jobs` row holds only what differs between the recipients of one message (recipient,
/// reason, privacy, badge, its state); the title, body and data come from the message's row at
/// that moment. So a job costs one narrow row to write, and a job nobody has claimed yet shows
/// the message's current text after an edit (SPEC §11.4). The default and privacy templates live
/// here and nowhere else.
struct JobPayload {
    var id: Int64
    var attempt: Int
    var app: String
    var recipient: String
    var createdAt: Int64
    var eventSource: String
    var eventID: String
    var eventType: String
    var reason: String
    /// The recipient's devices when the job is read: at claim time (SPEC §13.1).
    var devices: [Device.Target]
    var privacy: Bool
    var badge: Int
    var messageID: String
    var conversationID: String
    var receiverType: String
    var groupID: String?
    var sender: String
    var sentAt: Int64
    var parentID: String?
    var text: String
    var lastError: String?
    /// `clear` (SPEC §13.2) or `retract` (SPEC §11.4), or nil: the message's notification
    /// (`message` or `reply`).
    var removal: Removal?
    /// An `update` job (SPEC §11.4): the reason of the job it updates, whose template it uses.
    var updates: String?
    /// The device that acted (a read's `deviceId`): left out of `devices`.
    var excludeDevice: String?

    /// What a silent job removes from the recipient's devices: the notifications of replies read
    /// elsewhere (`clear`), or of a deleted message and its replies (`retract`).
    struct Removal {
        enum Kind: String { case clear, retract }
        var kind: Kind
        var collapseIds: [String]
    }

    /// The FROM clause over the jobs `source` (`jobs`, or a CTE of them) that `columns` reads:
    /// each job `j` and its message `m` (a clear job's thread root, which may not have arrived).
    static func from(_ source: String) -> String {
        "\(source) j LEFT JOIN messages m ON m.app = j.app AND m.id = j.message_id"
    }

    /// The select list that `init(row:)` reads by name, over `from(…)`.
    static let columns = """
        j.id, j.attempt, j.app, j.recipient, j.created_at,
        coalesce(j.event_source, m.event_source) AS event_source, coalesce(j.event_id, m.event_id) AS event_id,
        coalesce(j.event_type, m.event_type) AS event_type,
        j.reason, j.privacy, j.badge, j.message_id, coalesce(m.conversation_id, '') AS conversation_id,
        coalesce(m.receiver_type, '') AS receiver_type, m.group_id, coalesce(m.sender, '') AS sender,
        coalesce(m.sent_at, 0) AS sent_at, m.parent_id, coalesce(m.text, '') AS text, j.last_error,
        j.kind AS job_kind, j.exclude_device, array_to_json(j.clear_ids)::text AS clear_ids, j.template_reason,
        \(Device.Target.recipientDevices) AS devices
        """

    /// `message` (top-level), `reply` (SPEC §9), `clear` (SPEC §13.2) or `retract` (SPEC §11.4).
    var kind: String { removal?.kind.rawValue ?? (updates != nil ? "update" : parentID == nil ? "message" : "reply") }

    /// Title and body from the default or the privacy template.
    var notification: (title: String, body: String) {
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

    /// The job as its JSON object (`POST /v1/jobs/claim`); `withLastError` adds `lastError`
    /// (the dead-job list).
    func write(to writer: inout JSONWriter, withLastError: Bool = false) {
        let (title, body) = notification
        writer.object { job in
            job.field("id", wireJobID(id))
            job.field("attempt", attempt)
            job.field("app", app)
            job.field("recipient", recipient)
            job.field("createdAt", createdAt)
            job.field("event") { $0.object { event in
                event.field("source", eventSource)
                event.field("id", eventID)
                event.field("type", eventType)
            } }
            job.field("kind", kind)
            job.field("reason", reason)
            if let removal {
                // Silent: remove these notifications (a clear job: from the reader's other
                // devices, and set the badge).
                job.field("notification", JSONValue.null)
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
                } }
            } else {
                job.field("notification") { $0.object { notification in
                    notification.field("title", title)
                    notification.field("body", body)
                    notification.field("tag", messageID)
                    notification.field("collapseId", messageID)
                    notification.field("badge", badge)
                    if updates != nil { notification.field("silent", true) }
                } }
                job.field("data") { $0.object { data in
                    data.field("messageId", messageID)
                    data.field("parentMessageId", parentID)
                    data.field("conversationId", conversationID)
                    data.field("receiverType", receiverType)
                    data.field("receiver", groupID ?? sender)
                    data.field("sender", sender)
                    data.field("sentAt", sentAt)
                } }
            }
            job.field("excludeDevice", excludeDevice)
            job.field("devices", array: devices)
            if withLastError { job.field("lastError", lastError) }
        }
    }
}

extension JobPayload {
    /// A job from a row of `columns` (in an extension, so that the memberwise initialiser stays).
    init(row: PostgresRow) throws {
        id = try row.decode("id")
        attempt = try row.decode("attempt")
        app = try row.decode("app")
        recipient = try row.decode("recipient")
        createdAt = try row.decode("created_at")
        eventSource = try row.decode("event_source")
        eventID = try row.decode("event_id")
        eventType = try row.decode("event_type")
        reason = try row.decode("reason")
        privacy = try row.decode("privacy")
        badge = try row.decode("badge")
        messageID = try row.decode("message_id")
        conversationID = try row.decode("conversation_id")
        receiverType = try row.decode("receiver_type")
        groupID = try row.decode("group_id")
        sender = try row.decode("sender")
        sentAt = try row.decode("sent_at")
        parentID = try row.decode("parent_id")
        text = try row.decode("text")
        lastError = try row.decode("last_error")
        devices = try Device.Target.list(json: try row.decode("devices"))
        excludeDevice = try row.decode("exclude_device")
        if try row.decode("job_kind", as: String?.self) == "update" { updates = try row.decode("template_reason", as: String?.self) ?? "edited" }
        if let name = try row.decode("job_kind", as: String?.self), let kind = Removal.Kind(rawValue: name) {
            var ids: [String] = []
            if let text = try row.decode("clear_ids", as: String?.self), case .array(let items) = try JSONParser.parse(Array(text.utf8)) {
                ids = items.compactMap { if case .string(let id) = $0 { id } else { nil } }
            }
            removal = Removal(kind: kind, collapseIds: ids)
        }
    }
}

extension JobPayload: JSONWritable {
    func write(to writer: inout JSONWriter) { write(to: &writer, withLastError: false) }
}

/// A dead job as `GET /v1/jobs/dead` lists it: the job with its last error.
struct DeadJob: JSONWritable {
    let job: JobPayload
    func write(to writer: inout JSONWriter) { job.write(to: &writer, withLastError: true) }
}
