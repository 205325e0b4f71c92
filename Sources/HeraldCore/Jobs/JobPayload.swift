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

    /// The select list that `init(row:)` reads by name, over a `jobs` row `j` and its message `m`.
    static let columns = """
        j.id, j.attempt, j.app, j.recipient, j.created_at,
        coalesce(j.event_source, m.event_source) AS event_source, coalesce(j.event_id, m.event_id) AS event_id,
        coalesce(j.event_type, m.event_type) AS event_type,
        j.reason, j.privacy, j.badge, j.message_id, m.conversation_id, m.receiver_type, m.group_id, m.sender, m.sent_at,
        m.parent_id, coalesce(m.text, '') AS text, j.last_error
        """

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
    }

    /// Title and body from the default or the privacy template.
    var notification: (title: String, body: String) {
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

    /// The job's JSON object; `withLastError` adds `lastError` (the dead-job list).
    func json(withLastError: Bool = false) -> String {
        let (title, body) = notification
        var out = "{\"id\":\"j\(id)\",\"attempt\":\(attempt)"
        out.reserveCapacity(512 + text.utf8.count)
        /// `,"name":"value"` (or `null`), escaped.
        func field(_ name: String, _ value: String?) {
            out += ",\"" + name + "\":"
            if let value { JSONValue.writeString(value, to: &out) } else { out += "null" }
        }
        field("app", app)
        field("recipient", recipient)
        out += ",\"createdAt\":\(createdAt),\"event\":{\"source\":"
        JSONValue.writeString(eventSource, to: &out)
        field("id", eventID)
        field("type", eventType)
        out += "}"
        field("kind", parentID == nil ? "message" : "reply")
        field("reason", reason)
        out += ",\"notification\":{\"title\":"
        JSONValue.writeString(title, to: &out)
        field("body", body)
        field("tag", messageID)
        field("collapseId", messageID)
        out += ",\"badge\":\(badge)},\"data\":{\"messageId\":"
        JSONValue.writeString(messageID, to: &out)
        field("parentMessageId", parentID)
        field("conversationId", conversationID)
        field("receiverType", receiverType)
        field("receiver", groupID ?? sender)
        field("sender", sender)
        out += ",\"sentAt\":\(sentAt)}"
        if withLastError { field("lastError", lastError) }
        out += "}"
        return out
    }
}
