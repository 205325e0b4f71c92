/// Who gets a push for a message, and why not (SPEC §8.1): a pure function of its inputs, so
/// it is tested without a database and explained step by step (`…/routing`).
package enum Routing {
    package enum ConversationType: Sendable { case group, oneOnOne }
    package enum SubscriptionState: Sendable {
        case subscribed, unsubscribed, none

        /// The recipient's subscription as of a message sent at `at` (SPEC §4: each message is
        /// routed against the state as of that message, whatever the batching or the order of
        /// delivery), from the stored row: its own triggers (at `at`) count, later ones do not.
        /// Explicit API facts are in force from the moment they were made: a manual subscription
        /// subscribes, an unsubscribe unsubscribes, for any message routed after them.
        /// `since` is the time of the earliest trigger that no unsubscribe voids (or of the manual
        /// subscribe); a row subscribed only by triggers after `at` was, as of `at`, unsubscribed
        /// if the user had unsubscribed, and had no subscription otherwise.
        package init(subscribed: Bool?, since: Int64?, manualAt: Int64?, unsubscribedAt: Int64?, asOf at: Int64) {
            switch subscribed {
            case nil: self = .none
            case false?: self = .unsubscribed
            case true?:
                if manualAt != nil || (since ?? .min) <= at { self = .subscribed }
                else { self = unsubscribedAt == nil ? .none : .unsubscribed }
            }
        }

        /// The recipient's subscription at the time `at` itself, explicit calls judged at their
        /// own times too (SPEC §11.2: a reaction on a reply "in a thread r had unsubscribed from at
        /// `at`"): an unsubscribe made after `at` was not in force yet; one made at or before it
        /// holds unless the row was subscribed again (a manual subscribe or a trigger after the
        /// unsubscribe) by `at`. The row keeps only the latest unsubscribe and not the triggers it
        /// voided, so before that unsubscribe the state reads as `.none`.
        package init(subscribed: Bool?, since: Int64?, manualAt: Int64?, unsubscribedAt: Int64?, judgedAt at: Int64) {
            // `since` of a subscribed row: its earliest surviving trigger or its manual subscribe,
            // both after the unsubscribe
            let subscribedBy = subscribed == true && (since ?? .max) <= at
            if let unsubscribedAt, unsubscribedAt <= at {
                self = subscribedBy ? .subscribed : .unsubscribed
            } else {
                self = subscribedBy ? .subscribed : .none
            }
        }
    }

    /// Reasons, strongest first (a message's; then a reaction's and a member action's, SPEC §11).
    package enum Reason: String, Sendable, CaseIterable, Comparable {
        case mention, mentionAll, quote, subscribedThread, allReplies, allMessages
        case reactionOnOwnMessage, reactionOnMessage, memberAction

        package static func < (lhs: Reason, rhs: Reason) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// A user's level for one conversation (SPEC §18): it replaces their `messages`, `replies`
    /// and `quotedReplies` preferences there.
    package enum ConversationLevel: String, Sendable, CaseIterable {
        case all, mentions, nothing

        /// The preferences a message of the conversation is routed with.
        package func applied(to preferences: Preferences) -> Preferences {
            var preferences = preferences
            switch self {
            case .all: (preferences.messages, preferences.replies, preferences.quotedReplies) = (.subscribeToAll, .subscribeToAll, .subscribeToAll)
            case .mentions:
                (preferences.messages, preferences.replies, preferences.quotedReplies) = (.subscribeToMentions, .subscribeToMentions, .subscribeToMentions)
            case .nothing: (preferences.messages, preferences.replies, preferences.quotedReplies) = (.dontSubscribe, .dontSubscribe, .dontSubscribe)
            }
            return preferences
        }
    }

    package enum Skip: String, Sendable {
        case sender = "SENDER", noAccess = "NO_ACCESS", customMessage = "CUSTOM_MESSAGE"
        case messagesPreference = "MESSAGES_PREFERENCE", repliesPreference = "REPLIES_PREFERENCE", unsubscribed = "UNSUBSCRIBED"
        case mutePreference = "MUTE_PREFERENCE", dndPreference = "DND_PREFERENCE", schedulePreference = "SCHEDULE_PREFERENCE"
        /// The event was older than the app's `maxEventAgeSeconds` when it was applied (SPEC §11.5).
        case stale = "STALE"
        case reactionsPreference = "REACTIONS_PREFERENCE", groupActionsPreference = "GROUP_ACTIONS_PREFERENCE"
        /// A `message.edited` event: the recipient is not among the users it newly mentions.
        case notNewlyMentioned = "NOT_NEWLY_MENTIONED"
        /// The recipient's level for the conversation does not notify (SPEC §18).
        case conversationLevel = "CONVERSATION_LEVEL"
        /// A reply in a thread the recipient tracks without pushes, and it does not mention them (SPEC §18).
        case trackOnly = "TRACK_ONLY"
        /// A reply held for the recipient's thread digest, whose window is still open (SPEC §17).
        case digestPending = "DIGEST_PENDING"
        /// A held reply the recipient read (or that was deleted) before its digest window ended (SPEC §17).
        case read = "READ"
    }

    /// SPEC §17: a reply's job with one of these reasons is digestible — held while the
    /// recipient's digest window for the thread is open. Mentions, `@all` and quotes never are.
    package static func isDigestible(_ reason: Reason, isReply: Bool) -> Bool {
        isReply && (reason == .subscribedThread || reason == .allReplies)
    }

    /// The recipient's effective preferences for the message's conversation type.
    package struct Preferences: Sendable, Equatable {
        package var messages = MessagesPreference.subscribeToAll
        package var replies = RepliesPreference.subscribeToAll
        package var quotedReplies = QuotedRepliesPreference.subscribeToAll
        package var dndEnabled = false
        package var schedule = Schedule.allDay
        package var timezone = "UTC"

        package init() {}

        /// What a message of a conversation type reads of a user's effective preferences.
        package init(_ effective: EffectivePreferences, type: ConversationType) {
            let conversation = effective.conversation(type)
            messages = conversation.messages
            replies = conversation.replies
            quotedReplies = conversation.quotedReplies
            dndEnabled = effective.dnd == .enabled
            schedule = effective.schedule
            timezone = effective.timezone
        }
    }

    /// SPEC §11.5: an event whose own time (`sentAt`, `editedAt`, `at`) is older than the app's
    /// `maxEventAgeSeconds` when Herald applies it notifies nobody. `appliedAt` is Herald's time
    /// of the transaction that applied it, stored as its event's `received_at`: the jobs made then
    /// and the explain endpoint later judge the same two numbers, so they cannot disagree. A job
    /// producer leaves a stale event out before reading its recipients, as `decide` would skip
    /// each of them (staleness comes before anything of the recipient's but sender and access,
    /// which skip too).
    package struct EventAge: Sendable, Equatable {
        package var eventTime: Int64
        package var appliedAt: Int64
        /// The app's setting; 0 turns the rule off.
        package var maxEventAgeSeconds: Int

        package init(eventTime: Int64, appliedAt: Int64, maxEventAgeSeconds: Int) {
            self.eventTime = eventTime
            self.appliedAt = appliedAt
            self.maxEventAgeSeconds = maxEventAgeSeconds
        }

        package var isStale: Bool {
            maxEventAgeSeconds > 0 && eventTime < appliedAt - Int64(maxEventAgeSeconds) * 1000
        }
    }

    package struct Input: Sendable {
        package var isReply: Bool
        package var conversation: ConversationType
        /// `category == "custom"` and `sendNotification != true`.
        package var silentCustom = false
        package var isSender = false
        package var hasAccess = true
        /// The event's age when Herald applied it (SPEC §11.5); nil: not judged (never stale).
        package var age: EventAge?
        /// The event is a `message.edited`, which notifies only the users it newly mentions (SPEC
        /// §8.1); `mentionedExplicitly` then means newly mentioned by the edit.
        package var isEdit = false
        /// The recipient's subscription to the message's thread, after SPEC §5.1 is applied for it.
        package var subscription = SubscriptionState.none
        package var mentionedExplicitly = false
        package var mentionedAll = false
        /// The message quotes one written by the recipient.
        package var quotesRecipient = false
        package var preferences = Preferences()
        /// The recipient's level for the message's conversation (SPEC §18), nil when none is set.
        package var level: ConversationLevel?
        /// The recipient's subscription to the thread is `track` (SPEC §18).
        package var tracked = false
        package var mutedUntil: Int64?
        package var bypassForMentions = false
        package var bypassForAll = false
        /// The recipient's local time now, for the schedule.
        package var localTime = LocalTime(weekday: 0, hhmm: 1200)
        package var now: Int64 = 0

        package init(isReply: Bool, conversation: ConversationType) {
            self.isReply = isReply
            self.conversation = conversation
        }
    }

    /// What `decide` found, and the steps that led there.
    package struct Decision: Sendable, Equatable {
        package enum Outcome: Sendable, Equatable {
            /// A job, with its reason (the strongest that applies).
            case notified(Reason)
            /// No job, and why (the explain endpoint's skip code).
            case skipped(Skip)
        }

        package let outcome: Outcome
        /// What was checked, in order, for `…/routing`.
        package let steps: [String]

        /// Whether a job is made.
        package var notified: Bool {
            if case .notified = outcome { return true }
            return false
        }

        /// The reason's or the skip code's wire name (`reason` in the explain endpoint).
        package var code: String {
            switch outcome {
            case .notified(let reason): return reason.rawValue
            case .skipped(let skip): return skip.rawValue
            }
        }
    }

    package static func decide(_ input: Input) -> Decision {
        var steps: [String] = []
        func skip(_ code: Skip, _ why: String) -> Decision {
            steps.append(why)
            return Decision(outcome: .skipped(code), steps: steps)
        }
        if input.silentCustom { return skip(.customMessage, "a custom message without sendNotification notifies nobody") }
        if input.isSender { return skip(.sender, "the recipient sent the message") }
        guard input.hasAccess else { return skip(.noAccess, "the recipient has no access to the conversation") }
        steps.append("has access")
        if input.age?.isStale == true { return skip(.stale, "the event was older than the app's maxEventAgeSeconds when Herald applied it") }
        if input.isEdit && !input.mentionedExplicitly {
            return skip(.notNewlyMentioned, "an edit notifies only the users it newly mentions")
        }

        let mentioned = input.mentionedExplicitly || input.mentionedAll
        var preferences = input.preferences
        if let level = input.level {
            // SPEC §18: the conversation's level replaces the three category preferences, whatever
            // the app's userCanOverride says
            preferences = level.applied(to: preferences)
            steps.append("conversation level is \(level.rawValue)")
        }
        var reasons: [Reason] = []
        if input.mentionedExplicitly { reasons.append(.mention) }
        if input.mentionedAll { reasons.append(.mentionAll) }

        // Step 2: the category preference, then the quote rule.
        var categoryNotifies: Bool
        let categorySkip: Skip
        if input.isReply {
            categorySkip = .repliesPreference
            switch preferences.replies {
            case .dontSubscribe:
                categoryNotifies = false
                steps.append("replies preference is DONT_SUBSCRIBE")
            case _ where input.subscription == .unsubscribed && !input.mentionedExplicitly:
                return skip(.unsubscribed, "the recipient unsubscribed from the thread and is not mentioned explicitly")
            case .subscribeToMentions:
                categoryNotifies = mentioned
                steps.append("replies preference is SUBSCRIBE_TO_MENTIONS; mentioned: \(mentioned)")
            case .subscribeToSubscribedThreads:
                categoryNotifies = input.subscription == .subscribed
                if categoryNotifies { reasons.append(.subscribedThread) }
                steps.append("replies preference is SUBSCRIBE_TO_SUBSCRIBED_THREADS; subscribed: \(categoryNotifies)")
            case .subscribeToAll:
                categoryNotifies = true
                if input.subscription == .subscribed { reasons.append(.subscribedThread) }
                reasons.append(.allReplies)
                steps.append("replies preference is SUBSCRIBE_TO_ALL")
            }
        } else {
            categorySkip = .messagesPreference
            switch preferences.messages {
            case .dontSubscribe:
                categoryNotifies = false
                steps.append("messages preference is DONT_SUBSCRIBE")
            case .subscribeToMentions:
                categoryNotifies = mentioned
                steps.append("messages preference is SUBSCRIBE_TO_MENTIONS; mentioned: \(mentioned)")
            case .subscribeToAll:
                categoryNotifies = true
                reasons.append(.allMessages)
                steps.append("messages preference is SUBSCRIBE_TO_ALL")
            }
        }
        if input.quotesRecipient {
            let quoteNotifies: Bool
            switch preferences.quotedReplies {
            case .subscribeToAll, .subscribeToQuotesOnOwnMessages: quoteNotifies = true
            case .subscribeToMentions: quoteNotifies = mentioned
            case .dontSubscribe: quoteNotifies = false
            }
            if quoteNotifies && input.subscription != .unsubscribed {
                reasons.append(.quote)
                steps.append("the message quotes the recipient; quotedReplies is \(preferences.quotedReplies.rawValue)")
                categoryNotifies = true
            }
        }
        guard categoryNotifies else {
            if input.level != nil { return skip(.conversationLevel, "the conversation's level does not notify") }
            return skip(categorySkip, "the category preference does not notify")
        }
        if input.isReply && input.tracked && input.subscription != .unsubscribed {
            guard mentioned else { return skip(.trackOnly, "the recipient tracks the thread without pushes and is not mentioned") }
            steps.append("the recipient tracks the thread; mentioned: true")
        }

        // Step 3: quiet rules, each unless a bypass applies.
        let bypass = (input.bypassForMentions && input.mentionedExplicitly) || (input.bypassForAll && input.mentionedAll)
        if bypass {
            steps.append("the app bypasses mute, DND and schedule for this mention")
        } else {
            if let (code, why) = quiet(mutedUntil: input.mutedUntil, preferences: preferences, localTime: input.localTime, now: input.now) {
                return skip(code, why)
            }
            steps.append("not muted, no do-not-disturb, inside the schedule")
        }
        let strongest = reasons.min() ?? (input.isReply ? .allReplies : .allMessages)
        steps.append("notify: \(strongest.rawValue)")
        return Decision(outcome: .notified(strongest), steps: steps)
    }

    /// SPEC §8.1 step 3, the quiet rules in their order: the skip and why, or nil when none applies.
    package static func quiet(mutedUntil: Int64?, preferences: Preferences, localTime: LocalTime, now: Int64) -> (Skip, String)? {
        if let until = mutedUntil, until > now { return (.mutePreference, "the conversation is muted until \(until)") }
        if preferences.dndEnabled { return (.dndPreference, "do-not-disturb is enabled") }
        if !preferences.schedule.allows(weekday: localTime.weekday, hhmm: localTime.hhmm) {
            return (.schedulePreference, "the schedule of \(Schedule.dayNames[localTime.weekday]) in \(preferences.timezone) excludes \(localTime.hhmm)")
        }
        return nil
    }

    /// What a reaction's or a member action's decision reads besides its own rule: access,
    /// staleness and the quiet rules (no bypass applies: neither is a mention).
    package struct Common: Sendable {
        /// The recipient is the reactor, or the member event's subject or actor.
        package var isActor = false
        package var hasAccess = true
        /// The event's age when Herald applied it (SPEC §11.5); nil: not judged (never stale).
        package var age: EventAge?
        /// Do-not-disturb, the schedule and the time zone are read from here.
        package var preferences = Preferences()
        package var mutedUntil: Int64?
        package var localTime = LocalTime(weekday: 0, hhmm: 1200)
        package var now: Int64 = 0

        package init() {}
    }

    /// A reaction's recipient (SPEC §11.2).
    package struct ReactionInput: Sendable {
        package var common = Common()
        package var reactions = ReactionsPreference.ownMessages
        /// The recipient wrote the reacted message.
        package var wroteMessage = false
        /// The reacted message is a reply.
        package var onReply = false
        /// The recipient's subscription to the reply's thread at the reaction's time
        /// (`SubscriptionState.init(…judgedAt:)`).
        package var subscription = SubscriptionState.none

        package init() {}
    }

    /// A member action's recipient (SPEC §11.3).
    package struct MemberActionInput: Sendable {
        package var common = Common()
        package var action = MemberAction.joined
        /// The recipient's preference for that action.
        package var preference = MemberActionPreference.dontSubscribe

        package init() {}
    }

    /// SPEC §11.2: reactor, access, staleness, the `reactions` preference (with the thread's
    /// unsubscribe for a reaction on a reply), then the quiet rules.
    package static func decide(_ input: ReactionInput) -> Decision {
        var steps: [String] = []
        if let skipped = opening(input.common, actor: "the recipient is the reactor", steps: &steps) { return skipped }
        let reason: Reason
        switch input.reactions {
        case .dontSubscribe:
            steps.append("reactions preference is DONT_SUBSCRIBE")
            return Decision(outcome: .skipped(.reactionsPreference), steps: steps)
        case .ownMessages:
            guard input.wroteMessage else {
                steps.append("reactions preference is SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES and the recipient did not write the message")
                return Decision(outcome: .skipped(.reactionsPreference), steps: steps)
            }
            steps.append("reactions preference is SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES; the recipient wrote the message")
            reason = .reactionOnOwnMessage
        case .allMessages:
            if input.onReply && input.subscription == .unsubscribed && !input.wroteMessage {
                steps.append("the reaction is on a reply in a thread the recipient unsubscribed from, and they did not write it")
                return Decision(outcome: .skipped(.unsubscribed), steps: steps)
            }
            steps.append("reactions preference is SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES")
            reason = input.wroteMessage ? .reactionOnOwnMessage : .reactionOnMessage
        }
        return closing(input.common, reason: reason, steps: &steps)
    }

    /// SPEC §11.3: subject or actor, access, staleness, the action's preference, then the quiet rules.
    package static func decide(_ input: MemberActionInput) -> Decision {
        var steps: [String] = []
        if let skipped = opening(input.common, actor: "the recipient is the event's subject or actor", steps: &steps) { return skipped }
        guard input.preference == .subscribe else {
            steps.append("\(input.action.rawValue) preference is DONT_SUBSCRIBE")
            return Decision(outcome: .skipped(.groupActionsPreference), steps: steps)
        }
        steps.append("\(input.action.rawValue) preference is SUBSCRIBE")
        return closing(input.common, reason: .memberAction, steps: &steps)
    }

    private static func opening(_ common: Common, actor: String, steps: inout [String]) -> Decision? {
        if common.isActor {
            steps.append(actor)
            return Decision(outcome: .skipped(.sender), steps: steps)
        }
        guard common.hasAccess else {
            steps.append("the recipient has no access to the conversation")
            return Decision(outcome: .skipped(.noAccess), steps: steps)
        }
        steps.append("has access")
        if common.age?.isStale == true {
            steps.append("the event was older than the app's maxEventAgeSeconds when Herald applied it")
            return Decision(outcome: .skipped(.stale), steps: steps)
        }
        return nil
    }

    private static func closing(_ common: Common, reason: Reason, steps: inout [String]) -> Decision {
        if let (code, why) = quiet(mutedUntil: common.mutedUntil, preferences: common.preferences, localTime: common.localTime, now: common.now) {
            steps.append(why)
            return Decision(outcome: .skipped(code), steps: steps)
        }
        steps.append("not muted, no do-not-disturb, inside the schedule")
        steps.append("notify: \(reason.rawValue)")
        return Decision(outcome: .notified(reason), steps: steps)
    }
}
