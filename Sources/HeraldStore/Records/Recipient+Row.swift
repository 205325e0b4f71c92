import HeraldDomain
import Postgres

/// A recipient's own routing inputs, as the routing statements select them beside their other
/// columns — `preferences` (the stored document, text), `muted_until`, `level`, `tracked` (NULL
/// when the recipient has none) — read in this one place by the producers that route one
/// recipient at a time (`Fanout.runEdits`, `CatchUp`, `DigestCloser`) and by explain.
package struct RecipientRow {
    /// The recipient's effective preferences: their stored document over the app's (SPEC §7).
    package let preferences: EffectivePreferences
    package let mutedUntil: Int64?
    /// The recipient's level for the message's conversation (SPEC §18).
    package let level: Routing.ConversationLevel?
    /// Their subscription to the thread is track-only (SPEC §18).
    package let tracked: Bool

    /// The columns `init` reads but `tracked` (the subscription's, from the statement's join of
    /// `subscriptions`), for recipient `uid` (an SQL expression) of message `m`: the one select
    /// list of a recipient's own inputs for every statement that routes one recipient at a time.
    package static func columns(uid: SQL, app: String) -> SQL {
        """
        \(Fanout.levelOf(uid: uid, conversation: "m.conversation_id", app: "\(app)")) AS level,
        (SELECT up.preferences::text FROM user_preferences up WHERE up.app = \(app) AND up.uid = \(uid)) AS preferences,
        \(Fanout.mutedUntilOf(uid: uid, group: "m.group_id", other: "m.sender", app: "\(app)")) AS muted_until
        """
    }

    package init(_ row: PostgresRow, settings: AppSettings) throws {
        preferences = Fanout.effective(stored: try row.decode("preferences", as: String?.self), settings: settings)
        mutedUntil = try row.decode("muted_until", as: Int64?.self)
        level = try row.decode("level", as: String?.self).flatMap(Routing.ConversationLevel.init(rawValue:))
        tracked = try row.decode("tracked", as: Bool?.self) ?? false
    }
}

extension Fanout {
    /// The decision's input for `message` and a recipient whose own inputs are `recipient`.
    package static func input(_ message: DomainEvent.MessageCreated, recipient uid: String, _ recipient: RecipientRow,
                              subscription: Routing.SubscriptionState, mentionedExplicitly: Bool, settings: AppSettings,
                              now: Int64) -> Routing.Input {
        input(message, recipient: uid, subscription: subscription, mentionedExplicitly: mentionedExplicitly,
              preferences: recipient.preferences, settings: settings, mutedUntil: recipient.mutedUntil, now: now,
              level: recipient.level, tracked: recipient.tracked)
    }
}
