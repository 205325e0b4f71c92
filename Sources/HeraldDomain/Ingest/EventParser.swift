import HTTPTypes
import JSON

/// Reads `POST /v1/events` bodies in every CloudEvents HTTP mode (SPEC §4) and validates each
/// event's attributes and `data`, naming the path of the first bad field.
package enum EventParser {
    package static let maxBatch = 1000
    package static let maxTextLength = 4096
    /// Most ids in an event's `mentions` (issue 12: 100,000 took seconds and as many rows).
    package static let maxMentions = 1000
    /// The nesting a request body may have; each event may nest `JSONParser.maxDepth` (128).
    package static let maxBodyDepth = 1024

    /// One element of a request: a valid event, or a rejection with what is known of the event.
    package enum Item: Sendable {
        case valid(IncomingEvent, raw: JSONValue)
        case rejected(EventRejection, source: String?, id: String?, type: String?, raw: JSONValue)
    }

    package static let mediaTypes = ["application/json", "application/cloudevents+json", "application/cloudevents-batch+json"]

    /// A request's events in order, from its body, media type and headers (`header` looks one
    /// up by lower-case name). Throws 400 only when the body as a whole is unusable.
    package static func parse(body: [UInt8], mediaType: String?, header: (String) -> String?) throws(HTTPError) -> [Item] {
        if let specversion = header("ce-specversion"), !(mediaType ?? "").hasPrefix("application/cloudevents") {
            return [binaryMode(body: body, header: header, specversion: specversion)]
        }
        let document: JSONValue
        do {
            // Deeper than one event may be: a batch's events are held to the limit one by one.
            document = try JSONParser.parse(body, maxDepth: maxBodyDepth)
        } catch {
            throw HTTPError.invalidJSON(error)
        }
        switch document {
        case .object:
            return [item(document)]
        case .array(let elements):
            guard elements.count <= maxBatch else {
                throw HTTPError.badRequest("a batch holds at most \(maxBatch) events", params: ["max": .int(maxBatch)])
            }
            return elements.map(item)
        default:
            throw HTTPError.badRequest("body must be a CloudEvent object or an array of them")
        }
    }

    /// Binary mode: attributes in `ce-` headers, the body is `data`.
    package static func binaryMode(body: [UInt8], header: (String) -> String?, specversion: String) -> Item {
        var object: [String: JSONValue] = ["specversion": .string(specversion)]
        for (name, attribute) in [("ce-id", "id"), ("ce-source", "source"), ("ce-type", "type"),
                                    ("ce-time", "time"), ("ce-subject", "subject"), ("ce-traceparent", "traceparent")] {
            if let value = header(name) { object[attribute] = .string(value) }
        }
        if body.isEmpty {
            object["data"] = .null
        } else if let data = try? JSONParser.parse(body) {
            object["data"] = data
        } else {
            let raw = JSONValue.object(object)
            return .rejected(.bad("data is not valid JSON", field: "data"), source: object["source"]?.stringValue,
                             id: object["id"]?.stringValue, type: object["type"]?.stringValue, raw: raw)
        }
        return item(.object(object))
    }

    /// The distinct valid W3C `traceparent` attributes of the events (CloudEvents'
    /// distributed-tracing extension), at most `limit`, in order: for the request's log line.
    package static func traceparents(_ items: [Item], limit: Int = 16) -> [String] {
        var found: [String] = []
        for item in items {
            let raw: JSONValue = switch item {
            case .valid(_, let raw): raw
            case .rejected(_, _, _, _, let raw): raw
            }
            guard case .object(let object) = raw, let trace = TraceContext.traceparent(object["traceparent"]?.stringValue),
                  !found.contains(trace) else { continue }
            found.append(trace)
            if found.count == limit { break }
        }
        return found
    }

    package static func item(_ raw: JSONValue) -> Item {
        guard case .object(let object) = raw else {
            return .rejected(EventRejection(code: "ERR_BAD_REQUEST", message: "an event must be a JSON object", field: nil),
                             source: nil, id: nil, type: nil, raw: raw)
        }
        let source = object["source"]?.stringValue
        let id = object["id"]?.stringValue
        let type = object["type"]?.stringValue
        guard raw.depth <= JSONParser.maxDepth else {
            return .rejected(.bad("the event nests deeper than \(JSONParser.maxDepth) levels", field: "data"),
                             source: source.flatMap { $0.isEmpty ? nil : $0 }, id: id.flatMap { $0.isEmpty ? nil : $0 },
                             type: type, raw: .object(object.filter { $0.key != "data" }))
        }
        do {
            return .valid(try validate(object), raw: raw)
        } catch {
            return .rejected(error, source: source.flatMap { $0.isEmpty ? nil : $0 }, id: id.flatMap { $0.isEmpty ? nil : $0 },
                             type: type, raw: raw)
        }
    }

    package static func validate(_ object: [String: JSONValue]) throws(EventRejection) -> IncomingEvent {
        let envelope = Fields(object, prefix: "")
        guard case .string(let specversion)? = object["specversion"] else {
            throw .bad("specversion is required and must be \"1.0\"", field: "specversion")
        }
        guard specversion == "1.0" else { throw .bad("specversion must be \"1.0\"", field: "specversion") }
        let id = try envelope.attribute("id")
        let source = try envelope.attribute("source")
        let type = try envelope.attribute("type")
        guard case .object(let dataObject)? = object["data"] else {
            throw .bad("data must be a JSON object", field: "data")
        }
        let data = Fields(dataObject, prefix: "data.")
        let event: DomainEvent
        switch type {
        case "message.created": event = .messageCreated(try messageCreated(data))
        case "message.edited": event = .messageEdited(try messageEdited(data))
        case "message.deleted": event = .messageDeleted(try messageDeleted(data))
        case "member.joined", "member.added", "member.left", "member.kicked", "member.banned":
            event = .membership(try member(data, type: type))
        case "member.unbanned", "member.scopeChanged":
            event = .memberNotice(try member(data, type: type))
        case "reaction.added", "reaction.removed":
            event = .reaction(try reaction(data, added: type == "reaction.added"))
        case "message.pinned", "message.unpinned":
            event = .messagePin(try messagePin(data, pinned: type == "message.pinned"))
        case "message.saved", "message.unsaved":
            event = .messageSave(DomainEvent.MessageSave(messageID: try data.id("messageId"), uid: try data.id("uid"),
                                                         deviceID: try data.optionalID("deviceId"), at: try data.time("at"),
                                                         saved: type == "message.saved"))
        case "conversation.pinned", "conversation.unpinned":
            event = .conversationPin(try conversationPin(data, pinned: type == "conversation.pinned"))
        case "group.deleted":
            event = .groupDeleted(guid: try data.id("guid"), at: try data.time("at"))
        default:
            throw EventRejection(code: "ERR_UNKNOWN_EVENT_TYPE", message: "unknown event type \(type)", field: "type")
        }
        return IncomingEvent(source: source, id: id, type: type, event: event,
                             traceparent: TraceContext.traceparent(object["traceparent"]?.stringValue))
    }

    /// The member actions by event type, and whether each makes the subject a member (nil: no
    /// change to membership).
    package static let memberActions: [String: (MemberAction, joined: Bool?)] = [
        "member.joined": (.joined, true), "member.added": (.added, true), "member.left": (.left, false),
        "member.kicked": (.kicked, false), "member.banned": (.banned, false), "member.unbanned": (.unbanned, nil),
        "member.scopeChanged": (.scopeChanged, nil),
    ]
    package static let scopes: Set<String> = ["admin", "moderator", "participant"]
    /// Most bytes of a reaction (an emoji, or a custom reaction's name).
    package static let maxReactionBytes = 64

    package static func member(_ data: Fields, type: String) throws(EventRejection) -> DomainEvent.MembershipChange {
        let (action, joined) = memberActions[type]!
        var scope: String?
        if action == .scopeChanged, let value = try data.optionalString("scope") {
            guard scopes.contains(value) else {
                throw .bad("data.scope must be \"admin\", \"moderator\" or \"participant\"", field: "data.scope")
            }
            scope = value
        }
        return DomainEvent.MembershipChange(guid: try data.id("guid"), uid: try data.id("uid"), at: try data.time("at"),
                                            joined: joined ?? false, action: action, actor: try data.optionalID("actor"),
                                            scope: scope)
    }

    /// The actor of a system pin (SPEC §12.1).
    package static let system = "app_system"

    package static func messagePin(_ data: Fields, pinned: Bool) throws(EventRejection) -> DomainEvent.MessagePin {
        let by = try data.id("by")
        let receiverType = try data.string("receiverType")
        let receiver = try data.id("receiver")
        let conversation: Conversation?
        switch receiverType {
        case "group": conversation = .group(receiver)
        // one-on-one: the other user as seen from the actor; a system pin does not say whose
        case "user": conversation = by == system ? nil : .oneOnOne(by, receiver)
        default: throw .bad("data.receiverType must be \"group\" or \"user\"", field: "data.receiverType")
        }
        return DomainEvent.MessagePin(messageID: try data.id("messageId"), by: by, conversation: conversation,
                                      at: try data.time("at"), pinned: pinned)
    }

    package static func conversationPin(_ data: Fields, pinned: Bool) throws(EventRejection) -> DomainEvent.ConversationPin {
        let owner = try data.id("uid")
        let conversation = try self.conversation(data, sender: owner)
        if owner == system && conversation.groupID == nil {
            throw .bad("a system pin (uid app_system) names a group conversation", field: "data.receiverType")
        }
        return DomainEvent.ConversationPin(owner: owner, conversation: conversation, deviceID: try data.optionalID("deviceId"),
                                           at: try data.time("at"), pinned: pinned)
    }

    package static func reaction(_ data: Fields, added: Bool) throws(EventRejection) -> DomainEvent.Reaction {
        let id = try data.id("id")
        let messageID = try data.id("messageId")
        let reactor = try data.id("reactor")
        let reaction = try data.string("reaction")
        guard !reaction.isEmpty, reaction.utf8.count <= maxReactionBytes,
              !reaction.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
            throw .bad("data.reaction must be 1-\(maxReactionBytes) bytes without control characters", field: "data.reaction")
        }
        let parentID = try data.optionalID("parentId")
        if parentID == messageID { throw .bad("data.parentId must differ from data.messageId", field: "data.parentId") }
        return DomainEvent.Reaction(id: id, messageID: messageID, reactor: reactor, reaction: reaction,
                                    conversation: try conversation(data, sender: reactor),
                                    messageSender: try data.optionalID("messageSender"), parentID: parentID,
                                    at: try data.time("at"), added: added)
    }

    package static func conversation(_ data: Fields, sender: String) throws(EventRejection) -> Conversation {
        let receiverType = try data.string("receiverType")
        let receiver = try data.id("receiver")
        switch receiverType {
        case "group": return .group(receiver)
        case "user": return .oneOnOne(sender, receiver)
        default: throw .bad("data.receiverType must be \"group\" or \"user\"", field: "data.receiverType")
        }
    }

    package static func messageCreated(_ data: Fields) throws(EventRejection) -> DomainEvent.MessageCreated {
        let id = try data.id("id")
        let sender = try data.id("sender")
        let conversation = try conversation(data, sender: sender)
        let parentID = try data.optionalID("parentId")
        if parentID == id { throw .bad("data.parentId must differ from data.id", field: "data.parentId") }
        return DomainEvent.MessageCreated(
            id: id, sender: sender, conversation: conversation, parentID: parentID,
            parentSender: try data.optionalID("parentSender"), sentAt: try data.time("sentAt"),
            category: try data.optionalString("category") ?? "message", type: try data.optionalString("type"),
            text: try data.text("text"), mentions: try data.idList("mentions") ?? [],
            mentionsAll: try data.optionalBool("mentionsAll") ?? false,
            quotedMessageID: try data.optionalID("quotedMessageId"), quotedSender: try data.optionalID("quotedSender"),
            sendNotification: try data.optionalBool("sendNotification"))
    }

    package static func messageEdited(_ data: Fields) throws(EventRejection) -> DomainEvent.MessageEdited {
        let id = try data.id("id")
        let sender = try data.id("sender")
        let parentID = try data.optionalID("parentId")
        if parentID == id { throw .bad("data.parentId must differ from data.id", field: "data.parentId") }
        return DomainEvent.MessageEdited(
            id: id, sender: sender, conversation: try conversation(data, sender: sender), parentID: parentID,
            editedAt: try data.time("editedAt"), text: try data.text("text"), mentions: try data.idList("mentions"),
            mentionsAll: try data.optionalBool("mentionsAll"))
    }

    package static func messageDeleted(_ data: Fields) throws(EventRejection) -> DomainEvent.MessageDeleted {
        let id = try data.id("id")
        let receiverType = try data.string("receiverType")
        let receiver = try data.id("receiver")
        let conversation: Conversation?
        switch receiverType {
        case "group": conversation = .group(receiver)
        case "user": conversation = nil
        default: throw .bad("data.receiverType must be \"group\" or \"user\"", field: "data.receiverType")
        }
        let parentID = try data.optionalID("parentId")
        if parentID == id { throw .bad("data.parentId must differ from data.id", field: "data.parentId") }
        return DomainEvent.MessageDeleted(id: id, conversation: conversation, parentID: parentID,
                                          deletedAt: try data.time("deletedAt"))
    }

    /// Typed access to an object's fields; errors name `prefix + key`.
    package struct Fields {
        package let object: [String: JSONValue]
        package let prefix: String

        package init(_ object: [String: JSONValue], prefix: String) {
            self.object = object
            self.prefix = prefix
        }

        package func path(_ key: String) -> String { prefix + key }

        /// A required CloudEvents attribute: a non-empty string.
        package func attribute(_ key: String) throws(EventRejection) -> String {
            guard case .string(let value)? = object[key], !value.isEmpty else {
                throw .bad("\(path(key)) is required and must be a non-empty string", field: path(key))
            }
            guard value.utf8.count <= 256, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else {
                throw .bad("\(path(key)) must be at most 256 bytes without control characters", field: path(key))
            }
            return value
        }

        package func string(_ key: String) throws(EventRejection) -> String {
            guard let value = object[key], value != .null else { throw .bad("\(path(key)) is required", field: path(key)) }
            guard case .string(let text) = value else { throw .bad("\(path(key)) must be a string", field: path(key)) }
            guard !text.utf8.contains(0) else { throw .bad("\(path(key)) must not contain NUL characters", field: path(key)) }
            return text
        }

        package func optionalString(_ key: String) throws(EventRejection) -> String? {
            guard let value = object[key], value != .null else { return nil }
            guard case .string(let text) = value else { throw .bad("\(path(key)) must be a string", field: path(key)) }
            guard !text.utf8.contains(0) else { throw .bad("\(path(key)) must not contain NUL characters", field: path(key)) }
            return text
        }

        /// Text for a push body, truncated to 4096 characters.
        package func text(_ key: String) throws(EventRejection) -> String? {
            guard let text = try optionalString(key) else { return nil }
            return text.count > EventParser.maxTextLength ? String(text.prefix(EventParser.maxTextLength)) : text
        }

        /// An opaque id (SPEC §1); a JSON integer means its decimal string.
        package func id(_ key: String) throws(EventRejection) -> String {
            guard let value = object[key], value != .null else { throw .bad("\(path(key)) is required", field: path(key)) }
            return try Fields.id(value, path: path(key))
        }

        package func optionalID(_ key: String) throws(EventRejection) -> String? {
            guard let value = object[key], value != .null else { return nil }
            return try Fields.id(value, path: path(key))
        }

        package static func id(_ value: JSONValue, path: String) throws(EventRejection) -> String {
            let text: String
            switch value {
            case .string(let string): text = string
            case .int(let number): text = String(number)
            case .bigInteger(let digits): text = digits
            default: throw .bad("\(path) must be a string id", field: path)
            }
            guard Identifier.isValid(text) else {
                throw .bad("\(path) must be 1-128 characters without control characters or '/'", field: path)
            }
            return text
        }

        package func idList(_ key: String) throws(EventRejection) -> [String]? {
            guard let value = object[key], value != .null else { return nil }
            guard case .array(let elements) = value else { throw .bad("\(path(key)) must be an array", field: path(key)) }
            guard elements.count <= EventParser.maxMentions else {
                throw .bad("\(path(key)) holds at most \(EventParser.maxMentions) ids", field: path(key))
            }
            var ids: [String] = []
            var seen: Set<String> = []
            for (index, element) in elements.enumerated() {
                let id = try Fields.id(element, path: "\(path(key))[\(index)]")
                if seen.insert(id).inserted { ids.append(id) }
            }
            return ids
        }

        package func optionalBool(_ key: String) throws(EventRejection) -> Bool? {
            guard let value = object[key], value != .null else { return nil }
            guard case .bool(let flag) = value else { throw .bad("\(path(key)) must be a boolean", field: path(key)) }
            return flag
        }

        /// A time in epoch milliseconds: a non-negative integer, at most a day ahead of Herald's
        /// clock (a time far in the future would outrank every later event).
        package func time(_ key: String) throws(EventRejection) -> Int64 {
            guard let value = object[key], value != .null else { throw .bad("\(path(key)) is required", field: path(key)) }
            let time: Int64
            switch value {
            case .int(let number) where number >= 0: time = Int64(number)
            case .double(let number) where number >= 0 && number == number.rounded() && number < 9.0e15: time = Int64(number)
            default: throw .bad("\(path(key)) must be a time in epoch milliseconds", field: path(key))
            }
            guard time <= currentTimeMilliseconds() + 86_400_000 else {
                throw .bad("\(path(key)) is more than a day in the future", field: path(key))
            }
            return time
        }
    }
}

extension JSONValue {
    /// The string, or a JSON integer as its decimal text.
    package var stringValue: String? {
        switch self {
        case .string(let text): return text
        case .int(let number): return String(number)
        case .bigInteger(let digits): return digits
        default: return nil
        }
    }
}
