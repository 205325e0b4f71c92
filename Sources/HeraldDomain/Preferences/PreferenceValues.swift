/// The values of each choice preference (SPEC §7.1), in the order of CometChat's integer codes
/// (the first case is 1): a misspelled value does not compile, and a `switch` over one must name
/// every case. `PreferenceFields` lists them for validation; `Routing.decide` switches on them.
package protocol PreferenceChoice: RawRepresentable<String>, CaseIterable, Sendable, Equatable {}

extension PreferenceChoice {
    /// The wire names, in code order.
    package static var names: [String] { allCases.map(\.rawValue) }
}

/// `messages`: top-level messages of a conversation.
package enum MessagesPreference: String, PreferenceChoice {
    case dontSubscribe = "DONT_SUBSCRIBE", subscribeToAll = "SUBSCRIBE_TO_ALL", subscribeToMentions = "SUBSCRIBE_TO_MENTIONS"
}

/// `replies`: replies in threads.
package enum RepliesPreference: String, PreferenceChoice {
    case dontSubscribe = "DONT_SUBSCRIBE", subscribeToAll = "SUBSCRIBE_TO_ALL", subscribeToMentions = "SUBSCRIBE_TO_MENTIONS"
    case subscribeToSubscribedThreads = "SUBSCRIBE_TO_SUBSCRIBED_THREADS"
}

/// `quotedReplies`: messages that quote one of the recipient's.
package enum QuotedRepliesPreference: String, PreferenceChoice {
    case dontSubscribe = "DONT_SUBSCRIBE", subscribeToAll = "SUBSCRIBE_TO_ALL", subscribeToMentions = "SUBSCRIBE_TO_MENTIONS"
    case subscribeToQuotesOnOwnMessages = "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES"
}

/// `reactions`.
package enum ReactionsPreference: String, PreferenceChoice {
    case dontSubscribe = "DONT_SUBSCRIBE", ownMessages = "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES"
    case allMessages = "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"
}

/// `memberJoined`, `memberLeft` and the other member actions.
package enum MemberActionPreference: String, PreferenceChoice {
    case dontSubscribe = "DONT_SUBSCRIBE", subscribe = "SUBSCRIBE"
}

/// `mutePreferences.dnd`.
package enum DoNotDisturbPreference: String, PreferenceChoice {
    case disabled = "DISABLED", enabled = "ENABLED"
}
