import JSON

/// A member action a preference can subscribe to (SPEC §7.1, §11.3): the leaf of its path.
package enum MemberAction: String, Sendable, CaseIterable {
    case joined = "memberJoined", added = "memberAdded", left = "memberLeft", kicked = "memberKicked"
    case banned = "memberBanned", unbanned = "memberUnbanned", scopeChanged = "memberScopeChanged"
}

/// A user's preferences in force (SPEC §7.3), typed: what routing and templates read. Built in
/// one place from the user's stored choices and the app's settings, so no decision looks up a
/// preference by its path: a misspelled field or value does not compile.
///
/// The stored forms stay keyed by path (`UserPreferences`, `AppSettings.entries`): they are the
/// API's partial documents (a PATCH merges fields; a user's value stays stored while the app
/// makes the field non-overridable), validated by `PreferenceField`'s table.
package struct EffectivePreferences: Sendable, Equatable {
    /// The choices of one conversation type.
    package struct Conversation: Sendable, Equatable {
        package var messages: MessagesPreference
        package var replies: RepliesPreference
        package var quotedReplies: QuotedRepliesPreference
        package var reactions: ReactionsPreference
    }

    package var group: Conversation
    package var oneOnOne: Conversation
    /// Group member actions (`groupPreferences.member*`).
    package var memberActions: [MemberAction: MemberActionPreference]
    package var dnd: DoNotDisturbPreference
    package var schedule: Schedule
    package var usePrivacyTemplate: Bool
    /// An IANA zone name.
    package var timezone: String
    /// The thread digest window in seconds (SPEC §17), 0 when off.
    package var replyDigestSeconds: Int

    /// The values of `user` under `app`: the user's where the field is overridable and the user
    /// set it, else the app's. Stored values were validated against the same enums; one that no
    /// longer parses reads as the built-in default.
    package init(user: UserPreferences, app: AppSettings) {
        func value(_ path: String) -> JSONValue { user.effective(path, app: app) }
        func choice<T: PreferenceChoice>(_ path: String, _ fallback: T) -> T {
            if case .string(let name) = value(path), let parsed = T(rawValue: name) { return parsed }
            return fallback
        }
        func conversation(_ prefix: String) -> Conversation {
            Conversation(messages: choice(prefix + ".messages", MessagesPreference.subscribeToAll),
                         replies: choice(prefix + ".replies", RepliesPreference.subscribeToAll),
                         quotedReplies: choice(prefix + ".quotedReplies", QuotedRepliesPreference.subscribeToAll),
                         reactions: choice(prefix + ".reactions", ReactionsPreference.ownMessages))
        }
        group = conversation("groupPreferences")
        oneOnOne = conversation("oneOnOnePreferences")
        memberActions = Dictionary(uniqueKeysWithValues: MemberAction.allCases.map {
            ($0, choice("groupPreferences." + $0.rawValue, MemberActionPreference.dontSubscribe))
        })
        dnd = choice("mutePreferences.dnd", DoNotDisturbPreference.disabled)
        schedule = Schedule(json: value("mutePreferences.schedule")) ?? .allDay
        usePrivacyTemplate = value("usePrivacyTemplate") == .bool(true)
        if case .string(let zone) = value("timezone") { timezone = zone } else { timezone = "UTC" }
        if case .int(let seconds) = value("replyDigestSeconds"), seconds == 0 || PreferenceField.replyDigestRange.contains(seconds) {
            replyDigestSeconds = seconds
        } else {
            replyDigestSeconds = 0
        }
    }

    /// The app's defaults, for a user who stored nothing.
    package init(app: AppSettings) {
        self.init(user: UserPreferences(), app: app)
    }

    /// The choices for a conversation type.
    package func conversation(_ type: Routing.ConversationType) -> Conversation {
        type == .group ? group : oneOnOne
    }
}
