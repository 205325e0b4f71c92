import HeraldDomain
import Postgres

extension DomainEvent.MessageCreated {
    /// A stored message as routing reads it, from a row of `messages` (one place for every
    /// reader: the fan-out of large groups, catch-up, digests, explain). The statement selects
    /// `sender`, `group_id`, `user_a`, `user_b`, `parent_id`, `sent_at`, `category` and
    /// `send_notification`, and may select `id`, `text`, `mentions_all` and `quoted_sender`;
    /// `id`, `thread` and `at` stand in for the row's own when the caller knows better (a
    /// digest's message id, an edit's time). A stored message lists no mentions here: its
    /// mentions are rows of `mentions`, which each reader joins for itself.
    package init(row: PostgresRow, id: String? = nil, thread: String? = nil, at: Int64? = nil) throws {
        let conversation = try row.decode("group_id", as: String?.self).map(Conversation.group)
            ?? Conversation.oneOnOne(try row.decode("user_a", as: String.self), try row.decode("user_b", as: String.self))
        self.init(id: try id ?? row.decode("id"), sender: try row.decode("sender"), conversation: conversation,
                  parentID: try thread ?? row.decode("parent_id", as: String?.self), parentSender: nil,
                  sentAt: try at ?? row.decode("sent_at"), category: try row.decode("category", as: String?.self) ?? "message", type: nil,
                  text: try row.decodeIfPresent("text"), mentions: [],
                  mentionsAll: try row.decodeIfPresent("mentions_all", as: Bool.self) ?? false, quotedMessageID: nil,
                  quotedSender: try row.decodeIfPresent("quoted_sender"), sendNotification: try row.decode("send_notification"))
    }
}
