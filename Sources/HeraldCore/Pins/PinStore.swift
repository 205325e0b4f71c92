import Postgres

/// SPEC §12.1: pins, saves and conversation pins, each a row decided by its latest event: a
/// later `at` replaces it, and on equal times an unpin or unsave wins, so the final state is the
/// same in any order of delivery. The row itself serialises concurrent batches (its upsert locks
/// it), so no advisory lock is taken. Called by `FactWriter` in the ingest transaction.
enum PinStore {
    struct Pins {
        var messages: [DomainEvent.MessagePin] = []
        var saves: [DomainEvent.MessageSave] = []
        var conversations: [DomainEvent.ConversationPin] = []

        var isEmpty: Bool { messages.isEmpty && saves.isEmpty && conversations.isEmpty }
    }

    /// Of several events for one key in a batch, the one that decides: the latest, an unpin on a tie.
    static func deciding<T>(_ events: [T], key: (T) -> [UInt8], at: (T) -> Int64, sets: (T) -> Bool) -> [T] {
        var order: [[UInt8]] = []
        var chosen: [[UInt8]: T] = [:]
        for event in events {
            let k = key(event)
            guard let current = chosen[k] else {
                order.append(k)
                chosen[k] = event
                continue
            }
            if at(event) > at(current) || (at(event) == at(current) && sets(current) && !sets(event)) { chosen[k] = event }
        }
        return order.map { chosen[$0]! }
    }

    /// The upsert's rule, for a row `r` and the incoming `EXCLUDED`: newer, or as new and clearing.
    static func wins(_ flag: String) -> String {
        "EXCLUDED.at > r.at OR (EXCLUDED.at = r.at AND r.\(flag) AND NOT EXCLUDED.\(flag))"
    }

    static func apply(app: String, _ pins: Pins, on connection: PostgresConnection) throws {
        let messagePins = deciding(pins.messages, key: { Array($0.messageID.utf8) }, at: \.at, sets: \.pinned)
        if !messagePins.isEmpty {
            try connection.query("""
                INSERT INTO message_pins AS r (app, message_id, conversation_id, pinned, at, pinned_by)
                SELECT $1, x.id,
                       coalesce(x.conversation_id, (SELECT m.conversation_id FROM messages m WHERE m.app = $1 AND m.id = x.id)),
                       x.pinned, x.at, x.by
                  FROM unnest($2::text[], $3::text[], $4::boolean[], $5::bigint[], $6::text[]) AS x(id, conversation_id, pinned, at, by)
                 ORDER BY x.id COLLATE "C"
                ON CONFLICT (app, message_id) DO UPDATE
                   SET pinned = EXCLUDED.pinned, at = EXCLUDED.at, pinned_by = EXCLUDED.pinned_by,
                       conversation_id = coalesce(EXCLUDED.conversation_id, r.conversation_id)
                 WHERE \(wins("pinned"))
                """, [app, messagePins.map(\.messageID), messagePins.map { $0.conversation?.id }, messagePins.map(\.pinned),
                      messagePins.map(\.at), messagePins.map(\.by)])
        }
        let saves = deciding(pins.saves, key: { Array($0.uid.utf8) + [0] + Array($0.messageID.utf8) }, at: \.at, sets: \.saved)
        if !saves.isEmpty {
            try connection.query("""
                INSERT INTO message_saves AS r (app, uid, message_id, saved, at, device_id)
                SELECT $1, x.* FROM unnest($2::text[], $3::text[], $4::boolean[], $5::bigint[], $6::text[])
                    AS x(uid, message_id, saved, at, device_id)
                 ORDER BY x.uid COLLATE "C", x.message_id COLLATE "C"
                ON CONFLICT (app, uid, message_id) DO UPDATE
                   SET saved = EXCLUDED.saved, at = EXCLUDED.at, device_id = EXCLUDED.device_id
                 WHERE \(wins("saved"))
                """, [app, saves.map(\.uid), saves.map(\.messageID), saves.map(\.saved), saves.map(\.at), saves.map(\.deviceID)])
        }
        let conversations = deciding(pins.conversations, key: { Array($0.owner.utf8) + [0] + Array($0.conversation.id.utf8) },
                                     at: \.at, sets: \.pinned)
        if !conversations.isEmpty {
            let c = conversations.map(\.conversation)
            try connection.query("""
                INSERT INTO conversation_pins AS r (app, owner, conversation_id, receiver_type, group_id, user_a, user_b, pinned, at, device_id)
                SELECT $1, x.* FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[],
                                           $9::bigint[], $10::text[])
                    AS x(owner, conversation_id, receiver_type, group_id, user_a, user_b, pinned, at, device_id)
                 ORDER BY x.owner COLLATE "C", x.conversation_id COLLATE "C"
                ON CONFLICT (app, owner, conversation_id) DO UPDATE
                   SET pinned = EXCLUDED.pinned, at = EXCLUDED.at, device_id = EXCLUDED.device_id
                 WHERE \(wins("pinned"))
                """, [app, conversations.map(\.owner), c.map(\.id), c.map(\.receiverType), c.map(\.groupID), c.map(\.userA),
                      c.map(\.userB), conversations.map(\.pinned), conversations.map(\.at), conversations.map(\.deviceID)])
        }
    }
}
