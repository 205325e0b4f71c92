import HeraldDomain
import Postgres

/// SPEC §12.1: pins, saves and conversation pins, each a row decided by its latest event: a
/// later `at` replaces it, and on equal times an unpin or unsave wins, so the final state is the
/// same in any order of delivery. The row itself serialises concurrent batches (its upsert locks
/// it), so no advisory lock is taken. Called by `PinHandler` in the ingest transaction.
package enum PinStore {
    package struct Pins {
        package var messages: [(event: IncomingEvent, pin: DomainEvent.MessagePin)] = []
        package var saves: [(event: IncomingEvent, save: DomainEvent.MessageSave)] = []
        package var conversations: [(event: IncomingEvent, pin: DomainEvent.ConversationPin)] = []

        package var isEmpty: Bool { messages.isEmpty && saves.isEmpty && conversations.isEmpty }
    }

    /// A change of state an event made (not one that changed nothing: a second unpin, an older
    /// pin), for its sync jobs (SPEC §12.3).
    package struct Change {
        package enum Subject {
            /// A message's pin in its conversation (the event's; nil: a system pin in a one-on-one
            /// conversation, whose users the stored message names).
            case messagePin(messageID: String, conversation: Conversation?)
            case save(messageID: String, uid: String)
            case conversationPin(owner: String, conversation: Conversation)
        }
        package let event: IncomingEvent
        package let subject: Subject
        /// Pinned or saved now.
        package let set: Bool
        /// The pin's or save's time; who pinned.
        package let at: Int64
        package let by: String?
        package let deviceID: String?

        /// `data.change` and the job's reason.
        package var change: String {
            switch subject {
            case .messagePin: set ? "messagePinned" : "messageUnpinned"
            case .save: set ? "messageSaved" : "messageUnsaved"
            case .conversationPin: set ? "conversationPinned" : "conversationUnpinned"
            }
        }
    }

    /// Of several events for one key in a batch, the one that decides: the latest; on a tie an
    /// unpin, then the greater `tie` in byte order (the actor, the device).
    package static func deciding<T>(_ events: [T], key: (T) -> [UInt8], at: (T) -> Int64, sets: (T) -> Bool, tie: (T) -> String?) -> [T] {
        var order: [[UInt8]] = []
        var chosen: [[UInt8]: T] = [:]
        for event in events {
            let k = key(event)
            guard let current = chosen[k] else {
                order.append(k)
                chosen[k] = event
                continue
            }
            if at(event) != at(current) {
                if at(event) > at(current) { chosen[k] = event }
            } else if sets(event) != sets(current) {
                if !sets(event) { chosen[k] = event }
            } else if Array((tie(current) ?? "").utf8).lexicographicallyPrecedes(Array((tie(event) ?? "").utf8)) {
                chosen[k] = event
            }
        }
        return order.map { chosen[$0]! }
    }

    /// The upsert's rule, for a row `r` and the incoming `EXCLUDED` (as `deciding`): newer; as new
    /// and clearing; or as new, the same, and a greater `tie`.
    package static func wins(_ flag: SQL, tie: SQL) -> SQL {
        """
        EXCLUDED.at > r.at OR (EXCLUDED.at = r.at AND r.\(flag) AND NOT EXCLUDED.\(flag))
        OR (EXCLUDED.at = r.at AND r.\(flag) = EXCLUDED.\(flag)
            AND coalesce(EXCLUDED.\(tie), '') COLLATE "C" > coalesce(r.\(tie), '') COLLATE "C")
        """
    }

    /// Applies the batch's pins and saves; returns the changes of state they made. An upsert that
    /// replaces a row records what it was (`was_pinned`, `was_saved`), in the same statement, so
    /// a change is told from a newer tombstone without a read that a concurrent batch could outdate.
    package static func apply(app: String, _ pins: Pins, on connection: PostgresConnection) throws -> [Change] {
        var changes: [Change] = []
        let messagePins = deciding(pins.messages, key: { Array($0.pin.messageID.utf8) }, at: \.pin.at, sets: \.pin.pinned,
                                   tie: \.pin.by)
        if !messagePins.isEmpty {
            let byID = Dictionary(messagePins.map { ($0.pin.messageID, $0) }, uniquingKeysWith: { first, _ in first })
            for row in try connection.query("""
                INSERT INTO message_pins AS r (app, message_id, conversation_id, pinned, at, pinned_by, event_source, event_id)
                SELECT \(app), x.id,
                       coalesce(x.conversation_id, (SELECT m.conversation_id FROM messages m WHERE m.app = \(app) AND m.id = x.id)),
                       x.pinned, x.at, x.by, x.source, x.event_id
                  FROM unnest(\(messagePins.map(\.pin.messageID))::text[], \(messagePins.map { $0.pin.conversation?.id })::text[], \(messagePins.map(\.pin.pinned))::boolean[], \(messagePins.map(\.pin.at))::bigint[], \(messagePins.map(\.pin.by))::text[], \(messagePins.map(\.event.source))::text[], \(messagePins.map(\.event.id))::text[])
                    AS x(id, conversation_id, pinned, at, by, source, event_id)
                 ORDER BY x.id COLLATE "C"
                ON CONFLICT (app, message_id) DO UPDATE
                   SET pinned = EXCLUDED.pinned, at = EXCLUDED.at, pinned_by = EXCLUDED.pinned_by, was_pinned = r.pinned,
                       conversation_id = coalesce(EXCLUDED.conversation_id, r.conversation_id),
                       event_source = EXCLUDED.event_source, event_id = EXCLUDED.event_id
                 WHERE \(wins("pinned", tie: "pinned_by"))
                RETURNING message_id, pinned OR coalesce(was_pinned, false) AS changed
                """) {
                guard try row.decode("changed", as: Bool.self), let item = byID[try row.decode("message_id", as: String.self)] else { continue }
                changes.append(Change(event: item.event, subject: .messagePin(messageID: item.pin.messageID, conversation: item.pin.conversation),
                                      set: item.pin.pinned, at: item.pin.at, by: item.pin.by, deviceID: nil))
            }
        }
        let saves = deciding(pins.saves, key: { Array($0.save.uid.utf8) + [0] + Array($0.save.messageID.utf8) }, at: \.save.at,
                             sets: \.save.saved, tie: \.save.deviceID)
        if !saves.isEmpty {
            let byKey = Dictionary(saves.map { ($0.save.uid + "\u{0}" + $0.save.messageID, $0) }, uniquingKeysWith: { first, _ in first })
            for row in try connection.query("""
                INSERT INTO message_saves AS r (app, uid, message_id, saved, at, device_id)
                SELECT \(app), x.* FROM unnest(\(saves.map(\.save.uid))::text[], \(saves.map(\.save.messageID))::text[], \(saves.map(\.save.saved))::boolean[], \(saves.map(\.save.at))::bigint[], \(saves.map(\.save.deviceID))::text[])
                    AS x(uid, message_id, saved, at, device_id)
                 ORDER BY x.uid COLLATE "C", x.message_id COLLATE "C"
                ON CONFLICT (app, uid, message_id) DO UPDATE
                   SET saved = EXCLUDED.saved, at = EXCLUDED.at, device_id = EXCLUDED.device_id, was_saved = r.saved
                 WHERE \(wins("saved", tie: "device_id"))
                RETURNING uid, message_id, saved OR coalesce(was_saved, false) AS changed
                """) {
                guard try row.decode("changed", as: Bool.self),
                      let item = byKey[try row.decode("uid", as: String.self) + "\u{0}" + row.decode("message_id", as: String.self)] else { continue }
                changes.append(Change(event: item.event, subject: .save(messageID: item.save.messageID, uid: item.save.uid),
                                      set: item.save.saved, at: item.save.at, by: nil, deviceID: item.save.deviceID))
            }
        }
        let conversations = deciding(pins.conversations, key: { Array($0.pin.owner.utf8) + [0] + Array($0.pin.conversation.id.utf8) },
                                     at: \.pin.at, sets: \.pin.pinned, tie: \.pin.deviceID)
        if !conversations.isEmpty {
            let byKey = Dictionary(conversations.map { ($0.pin.owner + "\u{0}" + $0.pin.conversation.id, $0) }, uniquingKeysWith: { first, _ in first })
            let c = conversations.map(\.pin.conversation)
            for row in try connection.query("""
                INSERT INTO conversation_pins AS r (app, owner, conversation_id, receiver_type, group_id, user_a, user_b, pinned, at, device_id,
                                                    event_source, event_id)
                SELECT \(app), x.* FROM unnest(\(conversations.map(\.pin.owner))::text[], \(c.map(\.id))::text[], \(c.map(\.receiverType))::text[], \(c.map(\.groupID))::text[], \(c.map(\.userA))::text[], \(c.map(\.userB))::text[], \(conversations.map(\.pin.pinned))::boolean[],
                                           \(conversations.map(\.pin.at))::bigint[], \(conversations.map(\.pin.deviceID))::text[], \(conversations.map(\.event.source))::text[], \(conversations.map(\.event.id))::text[])
                    AS x(owner, conversation_id, receiver_type, group_id, user_a, user_b, pinned, at, device_id, source, event_id)
                 ORDER BY x.owner COLLATE "C", x.conversation_id COLLATE "C"
                ON CONFLICT (app, owner, conversation_id) DO UPDATE
                   SET pinned = EXCLUDED.pinned, at = EXCLUDED.at, device_id = EXCLUDED.device_id, was_pinned = r.pinned,
                       event_source = EXCLUDED.event_source, event_id = EXCLUDED.event_id
                 WHERE \(wins("pinned", tie: "device_id"))
                RETURNING owner, conversation_id, pinned OR coalesce(was_pinned, false) AS changed
                """) {
                guard try row.decode("changed", as: Bool.self),
                      let item = byKey[try row.decode("owner", as: String.self) + "\u{0}" + row.decode("conversation_id", as: String.self)] else { continue }
                changes.append(Change(event: item.event, subject: .conversationPin(owner: item.pin.owner, conversation: item.pin.conversation),
                                      set: item.pin.pinned, at: item.pin.at, by: item.pin.owner, deviceID: item.pin.deviceID))
            }
        }
        return changes
    }
}
