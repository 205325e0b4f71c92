import JSON

/// A conversation: a group, or a one-on-one chat between two users (SPEC §1).
package struct Conversation: Sendable, Hashable {
    package let id: String
    package let receiverType: String
    package let groupID: String?
    package let userA: String?
    package let userB: String?

    package static func group(_ guid: String) -> Conversation {
        Conversation(id: "group_" + guid, receiverType: "group", groupID: guid, userA: nil, userB: nil)
    }

    package static func oneOnOne(_ first: String, _ second: String) -> Conversation {
        let (a, b) = first.utf8.lexicographicallyPrecedes(second.utf8) ? (first, second) : (second, first)
        return Conversation(id: a + "_user_" + b, receiverType: "user", groupID: nil, userA: a, userB: b)
    }

}

/// A validated event of one of the types of SPEC §4.
package enum DomainEvent: Sendable {
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

    package struct MessageCreated: Sendable {
        package let id: String
        package let sender: String
        package let conversation: Conversation
        /// The thread's root: a parent that is itself a reply is resolved to its root at ingest.
        package var parentID: String?
        package var parentSender: String?
        package let sentAt: Int64
        package let category: String
        package let type: String?
        package let text: String?
        package let mentions: [String]
        package let mentionsAll: Bool
        package let quotedMessageID: String?
        package let quotedSender: String?
        package let sendNotification: Bool?

        package init(id: String, sender: String, conversation: Conversation, parentID: String?, parentSender: String?, sentAt: Int64, category: String, type: String?, text: String?, mentions: [String], mentionsAll: Bool, quotedMessageID: String?, quotedSender: String?, sendNotification: Bool?) {
            self.id = id
            self.sender = sender
            self.conversation = conversation
            self.parentID = parentID
            self.parentSender = parentSender
            self.sentAt = sentAt
            self.category = category
            self.type = type
            self.text = text
            self.mentions = mentions
            self.mentionsAll = mentionsAll
            self.quotedMessageID = quotedMessageID
            self.quotedSender = quotedSender
            self.sendNotification = sendNotification
        }
        package var threadID: String { parentID ?? id }
    }

    package struct MessageEdited: Sendable {
        package let id: String
        package let sender: String
        package let conversation: Conversation
        package var parentID: String?
        package let editedAt: Int64
        package let text: String?
        /// nil when the edit did not say (the mentions stay as they were).
        package let mentions: [String]?
        package let mentionsAll: Bool?
        package var threadID: String { parentID ?? id }
    }

    package struct MessageDeleted: Sendable {
        package let id: String
        /// nil for a one-on-one message: the other party is not in the event.
        package let conversation: Conversation?
        package var parentID: String?
        package let deletedAt: Int64
        package var threadID: String { parentID ?? id }
    }

    package struct MembershipChange: Sendable {
        package let guid: String
        package let uid: String
        package let at: Int64
        package let joined: Bool
        /// The preference this event is (`memberJoined` … `memberScopeChanged`).
        package var action: MemberAction = .joined
        /// Who added, kicked, banned, unbanned or changed the scope (optional, SPEC §11.1).
        package var actor: String? = nil
        /// `member.scopeChanged`: the new scope (`admin`, `moderator`, `participant`).
        package var scope: String? = nil

        package init(guid: String, uid: String, at: Int64, joined: Bool, action: MemberAction = .joined,
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
    package struct MessagePin: Sendable {
        package let messageID: String
        /// A uid, or `app_system`.
        package let by: String
        /// nil when the event cannot say (a system pin in a one-on-one conversation): the stored
        /// message's is taken.
        package let conversation: Conversation?
        package let at: Int64
        package let pinned: Bool
    }

    /// A user saved or unsaved a message (SPEC §12.1).
    package struct MessageSave: Sendable {
        package let messageID: String
        package let uid: String
        package let deviceID: String?
        package let at: Int64
        package let saved: Bool
    }

    /// A user (or the system, for every participant) pinned or unpinned a conversation (SPEC §12.1).
    package struct ConversationPin: Sendable {
        /// A uid, or `app_system`.
        package let owner: String
        package let conversation: Conversation
        package let deviceID: String?
        package let at: Int64
        package let pinned: Bool
    }

    /// A reaction was added to, or removed from, a message (SPEC §11.1).
    package struct Reaction: Sendable {
        package let id: String
        package let messageID: String
        package let reactor: String
        package let reaction: String
        package let conversation: Conversation
        /// The reacted message's author, as the event says (Herald's own facts win).
        package let messageSender: String?
        /// The reacted message's thread root when it is a reply (resolved at ingest, as a message's).
        package var parentID: String?
        package let at: Int64
        /// `reaction.added` (else `reaction.removed`).
        package let added: Bool
        package var threadID: String { parentID ?? messageID }
    }
}

/// One event of a request, after validation.
package struct IncomingEvent: Sendable {
    package let source: String
    package let id: String
    package let type: String
    package var event: DomainEvent
    /// The event's W3C `traceparent` attribute (CloudEvents' distributed-tracing extension) when
    /// it has the exact W3C form; stored with the event and put in its jobs' `data`.
    package var traceparent: String? = nil

    package init(source: String, id: String, type: String, event: DomainEvent, traceparent: String? = nil) {
        self.source = source
        self.id = id
        self.type = type
        self.event = event
        self.traceparent = traceparent
    }

    /// The message this event is about and the parent it names (nil: a root, or not said).
    package var message: (id: String, parentID: String?)? {
        switch event {
        case .messageCreated(let m): (m.id, m.parentID)
        case .messageEdited(let m): (m.id, m.parentID)
        case .messageDeleted(let m): (m.id, m.parentID)
        case .reaction(let r): (r.messageID, r.parentID)
        default: nil
        }
    }

    /// The same event filed under `parent` (a thread's root), with the root's author when known.
    package func inThread(_ parent: String, rootSender: String?) -> IncomingEvent {
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
package struct EventRejection: Error, Sendable {
    package let code: String
    package let message: String
    package let field: String?

    package static func bad(_ message: String, field: String) -> EventRejection {
        EventRejection(code: "ERR_BAD_REQUEST", message: message, field: field)
    }

    package var errorJSON: JSONValue {
        var object: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if let field { object["params"] = .object(["field": .string(field)]) }
        return .object(object)
    }
}
