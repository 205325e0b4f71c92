import JSON

/// A conversation: a group, or a one-on-one chat between two users (SPEC §1).
public struct Conversation: Sendable, Hashable {
    public let id: String
    public let receiverType: String
    public let groupID: String?
    public let userA: String?
    public let userB: String?

    public static func group(_ guid: String) -> Conversation {
        Conversation(id: "group_" + guid, receiverType: "group", groupID: guid, userA: nil, userB: nil)
    }

    public static func oneOnOne(_ first: String, _ second: String) -> Conversation {
        let (a, b) = first.utf8.lexicographicallyPrecedes(second.utf8) ? (first, second) : (second, first)
        return Conversation(id: a + "_user_" + b, receiverType: "user", groupID: nil, userA: a, userB: b)
    }

}

/// A validated event of one of the types of SPEC §4.
public enum DomainEvent: Sendable {
    case messageCreated(MessageCreated)
    case messageEdited(MessageEdited)
    case messageDeleted(MessageDeleted)
    case membership(MembershipChange)
    /// `member.unbanned`, `member.scopeChanged`: no change to membership, but a member action
    /// that notifies (SPEC §11.3).
    case memberNotice(MembershipChange)
    case groupDeleted(guid: String, at: Int64)
    /// `reaction.added`, `reaction.removed` (SPEC §11.1).
    case reaction(Reaction)
    /// `message.pinned`, `message.unpinned` (SPEC §12.1).
    case messagePin(MessagePin)
    /// `message.saved`, `message.unsaved` (SPEC §12.1).
    case messageSave(MessageSave)
    /// `conversation.pinned`, `conversation.unpinned` (SPEC §12.1).
    case conversationPin(ConversationPin)
    /// Accepted and recorded, with no effect.
    case noEffect

    public struct MessageCreated: Sendable {
        public let id: String
        public let sender: String
        public let conversation: Conversation
        /// The thread's root: a parent that is itself a reply is resolved to its root at ingest.
        public var parentID: String?
        public var parentSender: String?
        public let sentAt: Int64
        public let category: String
        public let type: String?
        public let text: String?
        public let mentions: [String]
        public let mentionsAll: Bool
        public let quotedMessageID: String?
        public let quotedSender: String?
        public let sendNotification: Bool?
        public var threadID: String { parentID ?? id }
    }

    public struct MessageEdited: Sendable {
        public let id: String
        public let sender: String
        public let conversation: Conversation
        public var parentID: String?
        public let editedAt: Int64
        public let text: String?
        /// nil when the edit did not say (the mentions stay as they were).
        public let mentions: [String]?
        public let mentionsAll: Bool?
        public var threadID: String { parentID ?? id }
    }

    public struct MessageDeleted: Sendable {
        public let id: String
        /// nil for a one-on-one message: the other party is not in the event.
        public let conversation: Conversation?
        public var parentID: String?
        public let deletedAt: Int64
        public var threadID: String { parentID ?? id }
    }

    public struct MembershipChange: Sendable {
        public let guid: String
        public let uid: String
        public let at: Int64
        public let joined: Bool
        /// The preference this event is (`memberJoined` … `memberScopeChanged`).
        public var action: MemberAction = .joined
        /// Who added, kicked, banned, unbanned or changed the scope (optional, SPEC §11.1).
        public var actor: String? = nil
        /// `member.scopeChanged`: the new scope (`admin`, `moderator`, `participant`).
        public var scope: String? = nil

        public init(guid: String, uid: String, at: Int64, joined: Bool, action: MemberAction = .joined,
                    actor: String? = nil, scope: String? = nil) {
            self.guid = guid
            self.uid = uid
            self.at = at
            self.joined = joined
            self.action = action
            self.actor = actor
            self.scope = scope
        }
    }

    /// A message was pinned or unpinned in its conversation (SPEC §12.1).
    public struct MessagePin: Sendable {
        public let messageID: String
        /// A uid, or `app_system`.
        public let by: String
        /// nil when the event cannot say (a system pin in a one-on-one conversation): the stored
        /// message's is taken.
        public let conversation: Conversation?
        public let at: Int64
        public let pinned: Bool
    }

    /// A user saved or unsaved a message (SPEC §12.1).
    public struct MessageSave: Sendable {
        public let messageID: String
        public let uid: String
        public let deviceID: String?
        public let at: Int64
        public let saved: Bool
    }

    /// A user (or the system, for every participant) pinned or unpinned a conversation (SPEC §12.1).
    public struct ConversationPin: Sendable {
        /// A uid, or `app_system`.
        public let owner: String
        public let conversation: Conversation
        public let deviceID: String?
        public let at: Int64
        public let pinned: Bool
    }

    /// A reaction was added to, or removed from, a message (SPEC §11.1).
    public struct Reaction: Sendable {
        public let id: String
        public let messageID: String
        public let reactor: String
        public let reaction: String
        public let conversation: Conversation
        /// The reacted message's author, as the event says (Herald's own facts win).
        public let messageSender: String?
        /// The reacted message's thread root when it is a reply (resolved at ingest, as a message's).
        public var parentID: String?
        public let at: Int64
        /// `reaction.added` (else `reaction.removed`).
        public let added: Bool
        public var threadID: String { parentID ?? messageID }
    }
}

/// One event of a request, after validation.
public struct IncomingEvent: Sendable {
    public let source: String
    public let id: String
    public let type: String
    public var event: DomainEvent
    /// The event's W3C `traceparent` attribute (CloudEvents' distributed-tracing extension) when
    /// it has the exact W3C form; stored with the event and put in its jobs' `data`.
    public var traceparent: String? = nil

    /// The message this event is about and the parent it names (nil: a root, or not said).
    var message: (id: String, parentID: String?)? {
        switch event {
        case .messageCreated(let m): (m.id, m.parentID)
        case .messageEdited(let m): (m.id, m.parentID)
        case .messageDeleted(let m): (m.id, m.parentID)
        case .reaction(let r): (r.messageID, r.parentID)
        default: nil
        }
    }

    /// The same event filed under `parent` (a thread's root), with the root's author when known.
    func inThread(_ parent: String, rootSender: String?) -> IncomingEvent {
        var copy = self
        switch event {
        case .messageCreated(var m):
            m.parentID = parent
            m.parentSender = rootSender
            copy.event = .messageCreated(m)
        case .messageEdited(var m):
            m.parentID = parent
            copy.event = .messageEdited(m)
        case .messageDeleted(var m):
            m.parentID = parent
            copy.event = .messageDeleted(m)
        case .reaction(var r):
            r.parentID = parent
            copy.event = .reaction(r)
        default:
            break
        }
        return copy
    }
}

/// Why one event of a request was rejected (SPEC §4): reported in `results` and recorded.
public struct EventRejection: Error, Sendable {
    public let code: String
    public let message: String
    public let field: String?

    static func bad(_ message: String, field: String) -> EventRejection {
        EventRejection(code: "ERR_BAD_REQUEST", message: message, field: field)
    }

    var errorJSON: JSONValue {
        var object: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if let field { object["params"] = .object(["field": .string(field)]) }
        return .object(object)
    }
}
