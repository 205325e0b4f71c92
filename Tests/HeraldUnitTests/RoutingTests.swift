@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Testing

@Suite("Routing decision")
struct RoutingTests {
    enum Mention: CaseIterable { case explicit, all, neither }
    enum Quiet: CaseIterable { case none, muted, dnd, outsideSchedule }
    enum Bypass: CaseIterable { case none, mentions, all }

    // Every case of the enums: a value added to one is in the table (and `expected` must know it).
    static let messagesValues = MessagesPreference.allCases.map(\.rawValue)
    static let repliesValues = RepliesPreference.allCases.map(\.rawValue)
    static let quotedValues = QuotedRepliesPreference.allCases.map(\.rawValue)

    static func input(reply: Bool, type: Routing.ConversationType, messages: String = "SUBSCRIBE_TO_ALL",
                      replies: String = "SUBSCRIBE_TO_ALL", quoted: String = "SUBSCRIBE_TO_ALL",
                      subscription: Routing.SubscriptionState = .none, mention: Mention = .neither, quotes: Bool = false,
                      quiet: Quiet = .none, bypass: Bypass = .none, level: String? = nil, tracked: Bool = false) -> Routing.Input {
        var input = Routing.Input(isReply: reply, conversation: type)
        input.level = level.map { Routing.ConversationLevel(rawValue: $0)! }
        input.tracked = tracked
        input.preferences.messages = MessagesPreference(rawValue: messages)!
        input.preferences.replies = RepliesPreference(rawValue: replies)!
        input.preferences.quotedReplies = QuotedRepliesPreference(rawValue: quoted)!
        input.subscription = subscription
        input.mentionedExplicitly = mention == .explicit
        input.mentionedAll = mention == .all
        input.quotesRecipient = quotes
        input.now = 1_000_000
        switch quiet {
        case .none: break
        case .muted: input.mutedUntil = 2_000_000
        case .dnd: input.preferences.dndEnabled = true
        case .outsideSchedule:
            input.preferences.schedule.days[2] = .init(from: 900, to: 1700, dnd: false)
            input.localTime = LocalTime(weekday: 2, hhmm: 2000)
        }
        input.bypassForMentions = bypass == .mentions
        input.bypassForAll = bypass == .all
        return input
    }

    /// SPEC §8.1 written as a table of rules, independently of `Routing.decide`'s control flow.
    static func expected(reply: Bool, messages: String, replies: String, quoted: String, subscription: Routing.SubscriptionState,
                         mention: Mention, quotes: Bool, quiet: Quiet, bypass: Bypass, level: String? = nil, tracked: Bool = false) -> String {
        // SPEC §18: a conversation level stands for all three category preferences
        let levelled = level.map { ["all": "SUBSCRIBE_TO_ALL", "mentions": "SUBSCRIBE_TO_MENTIONS", "nothing": "DONT_SUBSCRIBE"][$0]! }
        let (messages, replies, quoted) = levelled.map { ($0, $0, $0) } ?? (messages, replies, quoted)
        let mentioned = mention != .neither
        let unsubscribed = subscription == .unsubscribed
        if reply && replies != "DONT_SUBSCRIBE" && unsubscribed && mention != .explicit { return "UNSUBSCRIBED" }
        let categoryRule: [String: Bool] = reply
            ? ["DONT_SUBSCRIBE": false, "SUBSCRIBE_TO_ALL": true, "SUBSCRIBE_TO_MENTIONS": mentioned,
               "SUBSCRIBE_TO_SUBSCRIBED_THREADS": subscription == .subscribed]
            : ["DONT_SUBSCRIBE": false, "SUBSCRIBE_TO_ALL": true, "SUBSCRIBE_TO_MENTIONS": mentioned]
        let category = categoryRule[reply ? replies : messages]!
        let quoteRule: [String: Bool] = ["DONT_SUBSCRIBE": false, "SUBSCRIBE_TO_ALL": true,
                                         "SUBSCRIBE_TO_MENTIONS": mentioned, "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES": true]
        let quote = quotes && !unsubscribed && quoteRule[quoted]!
        guard category || quote else { return level != nil ? "CONVERSATION_LEVEL" : reply ? "REPLIES_PREFERENCE" : "MESSAGES_PREFERENCE" }
        if reply && tracked && !unsubscribed && !mentioned { return "TRACK_ONLY" }
        let bypassed = (bypass == .mentions && mention == .explicit) || (bypass == .all && mention == .all)
        if !bypassed {
            switch quiet {
            case .muted: return "MUTE_PREFERENCE"
            case .dnd: return "DND_PREFERENCE"
            case .outsideSchedule: return "SCHEDULE_PREFERENCE"
            case .none: break
            }
        }
        var reasons: [String] = []
        if mention == .explicit { reasons.append("mention") }
        if mention == .all { reasons.append("mentionAll") }
        if quote { reasons.append("quote") }
        if reply && subscription == .subscribed && (replies == "SUBSCRIBE_TO_ALL" || replies == "SUBSCRIBE_TO_SUBSCRIBED_THREADS") {
            reasons.append("subscribedThread")
        }
        if reply && replies == "SUBSCRIBE_TO_ALL" { reasons.append("allReplies") }
        if !reply && messages == "SUBSCRIBE_TO_ALL" { reasons.append("allMessages") }
        return reasons.first ?? (reply ? "allReplies" : "allMessages")
    }

    /// The conversation type chooses which preferences apply (`Preferences.init(user:app:type:)`,
    /// covered by PreferenceTests); the decision reads only the preferences, so the table runs once.
    @Test("every preference value × subscription × mention × quote × quiet rule × bypass × conversation level × track")
    func exhaustive() {
        let type = Routing.ConversationType.group
        var checked = 0
        for level in [nil] + Routing.ConversationLevel.allCases.map(\.rawValue) {
        for tracked in [false, true] {
        for reply in [false, true] {
            for category in (reply ? Self.repliesValues : Self.messagesValues) {
                for quoted in Self.quotedValues {
                    for subscription in [Routing.SubscriptionState.subscribed, .unsubscribed, .none] {
                        for mention in Mention.allCases {
                            for quotes in [false, true] {
                                for quiet in Quiet.allCases {
                                    for bypass in Bypass.allCases {
                                        let input = Self.input(reply: reply, type: type, messages: reply ? "SUBSCRIBE_TO_ALL" : category,
                                                               replies: reply ? category : "SUBSCRIBE_TO_ALL", quoted: quoted,
                                                               subscription: subscription, mention: mention, quotes: quotes,
                                                               quiet: quiet, bypass: bypass, level: level, tracked: tracked)
                                        let want = Self.expected(reply: reply, messages: input.preferences.messages.rawValue,
                                                                 replies: input.preferences.replies.rawValue, quoted: quoted,
                                                                 subscription: subscription, mention: mention, quotes: quotes,
                                                                 quiet: quiet, bypass: bypass, level: level, tracked: tracked)
                                        let got = Routing.decide(input)
                                        #expect(got.code == want, "reply \(reply) \(category) quoted \(quoted) \(subscription) \(mention) quotes \(quotes) \(quiet) \(bypass) level \(level ?? "-") tracked \(tracked)")
                                        #expect(got.notified == (want.first!.isLowercase))
                                        // the steps end with the outcome: the notification and its reason, or the skip
                                        if got.notified {
                                            #expect(got.steps.last == "notify: \(want)")
                                        } else {
                                            #expect(got.steps.last.map { !$0.hasPrefix("notify") } == true)
                                        }
                                        checked += 1
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        }
        }
        #expect(checked == (Self.messagesValues.count + Self.repliesValues.count) * Self.quotedValues.count * 3
                    * Mention.allCases.count * 2 * Quiet.allCases.count * Bypass.allCases.count * 4 * 2)
    }

    @Test("hand-checked cases", arguments: [
        // (reply, replies, subscription, mention, quiet, bypass, expected)
        (true, "SUBSCRIBE_TO_SUBSCRIBED_THREADS", Routing.SubscriptionState.subscribed, Mention.neither, Quiet.none, Bypass.none, "subscribedThread"),
        (true, "SUBSCRIBE_TO_SUBSCRIBED_THREADS", .none, .neither, .none, .none, "REPLIES_PREFERENCE"),
        (true, "SUBSCRIBE_TO_ALL", .unsubscribed, .all, .none, .none, "UNSUBSCRIBED"),
        (true, "SUBSCRIBE_TO_ALL", .unsubscribed, .explicit, .none, .none, "mention"),
        (true, "DONT_SUBSCRIBE", .subscribed, .explicit, .none, .mentions, "REPLIES_PREFERENCE"),
        (true, "SUBSCRIBE_TO_ALL", .subscribed, .explicit, .dnd, .mentions, "mention"),
        (true, "SUBSCRIBE_TO_ALL", .subscribed, .all, .dnd, .mentions, "DND_PREFERENCE"),
        (true, "SUBSCRIBE_TO_ALL", .subscribed, .all, .muted, .all, "mentionAll"),
        (true, "SUBSCRIBE_TO_MENTIONS", .subscribed, .neither, .none, .none, "REPLIES_PREFERENCE"),
        (true, "SUBSCRIBE_TO_ALL", .none, .neither, .outsideSchedule, .none, "SCHEDULE_PREFERENCE"),
    ])
    func handChecked(reply: Bool, replies: String, subscription: Routing.SubscriptionState, mention: Mention, quiet: Quiet,
                     bypass: Bypass, expected: String) {
        let input = Self.input(reply: reply, type: .group, replies: replies, subscription: subscription, mention: mention,
                               quiet: quiet, bypass: bypass)
        #expect(Routing.decide(input).code == expected)
    }

    @Test("custom messages without sendNotification, the sender and users without access are skipped first")
    func earlySkips() {
        var input = Self.input(reply: true, type: .group, mention: .explicit)
        input.silentCustom = true
        #expect(Routing.decide(input).code == "CUSTOM_MESSAGE")
        input.silentCustom = false
        input.isSender = true
        #expect(Routing.decide(input).code == "SENDER")
        input.isSender = false
        input.hasAccess = false
        #expect(Routing.decide(input).code == "NO_ACCESS")
    }

    @Test("a stale event notifies nobody, mentions and bypasses included; sender and access are judged first")
    func stale() {
        var input = Self.input(reply: true, type: .group, mention: .explicit)
        input.bypassForMentions = true
        #expect(Routing.decide(input).notified)
        input.age = Self.staleAge
        #expect(Routing.decide(input).outcome == .skipped(.stale))
        #expect(Routing.decide(input).code == "STALE")
        input.hasAccess = false
        #expect(Routing.decide(input).code == "NO_ACCESS")
        input.hasAccess = true
        input.isSender = true
        #expect(Routing.decide(input).code == "SENDER")
        // The rule itself: older than maxEventAgeSeconds when applied; 0 turns it off.
        var settings = AppSettings.defaults
        let now: Int64 = 1_800_000_000_000
        #expect(settings.maxEventAgeSeconds == 86_400)
        #expect(settings.age(of: now - 86_400_001, appliedAt: now).isStale)
        #expect(!settings.age(of: now - 86_400_000, appliedAt: now).isStale)
        input.isSender = false
        input.age = settings.age(of: now - 86_400_000, appliedAt: now)
        #expect(Routing.decide(input).notified, "not stale at its limit")
        input.age = settings.age(of: now - 86_400_001, appliedAt: now)
        #expect(Routing.decide(input).code == "STALE", "a millisecond past it")
        settings.maxEventAgeSeconds = 0
        #expect(!settings.age(of: 0, appliedAt: now).isStale)
    }

    @Test("an edit notifies only the users it newly mentions; sender, access and staleness are judged first (issue 32, item 13)")
    func edit() {
        var input = Self.input(reply: true, type: .group, replies: "DONT_SUBSCRIBE")
        input.isEdit = true
        #expect(Routing.decide(input).code == "NOT_NEWLY_MENTIONED")
        input.age = Self.staleAge
        #expect(Routing.decide(input).code == "STALE")
        input.age = nil
        input.mentionedExplicitly = true
        #expect(Routing.decide(input).code == "REPLIES_PREFERENCE", "newly mentioned: the mention rule of §8.1")
        input.preferences.replies = .subscribeToAll
        #expect(Routing.decide(input).outcome == .notified(.mention))
        input.isSender = true
        #expect(Routing.decide(input).code == "SENDER")
    }

    @Test("a subscription judged at a time: an unsubscribe counts from its own time, a re-subscription from its start (issue 32, item 11)")
    func judgedAt() {
        func state(_ subscribed: Bool?, since: Int64?, manual: Int64? = nil, unsubscribed: Int64?, at: Int64) -> Routing.SubscriptionState {
            Routing.SubscriptionState(subscribed: subscribed, since: since, manualAt: manual, unsubscribedAt: unsubscribed, judgedAt: at)
        }
        #expect(state(nil, since: nil, unsubscribed: nil, at: 50) == .none)
        // unsubscribed at 100: not yet at 99, from 100 on
        #expect(state(false, since: 100, unsubscribed: 100, at: 99) == .none)
        #expect(state(false, since: 100, unsubscribed: 100, at: 100) == .unsubscribed)
        #expect(state(false, since: 100, unsubscribed: 100, at: 500) == .unsubscribed)
        // subscribed again at 200 (a newer reply, or a PUT): unsubscribed in between
        #expect(state(true, since: 200, unsubscribed: 100, at: 150) == .unsubscribed)
        #expect(state(true, since: 200, manual: 200, unsubscribed: 100, at: 200) == .subscribed)
        #expect(state(true, since: 200, unsubscribed: 100, at: 50) == .none)
        // never unsubscribed: subscribed from its start
        #expect(state(true, since: 200, unsubscribed: nil, at: 199) == .none)
        #expect(state(true, since: 200, unsubscribed: nil, at: 200) == .subscribed)
        // messages keep their rule: an unsubscribe holds for anything routed after it
        #expect(Routing.SubscriptionState(subscribed: false, since: 100, manualAt: nil, unsubscribedAt: 100, asOf: 50) == .unsubscribed)
    }

    @Test("an expired mute does not silence")
    func expiredMute() {
        var input = Self.input(reply: false, type: .oneOnOne)
        input.mutedUntil = input.now - 1
        #expect(Routing.decide(input).notified)
    }

    /// A day and a millisecond old when applied, at the default `maxEventAgeSeconds`.
    static let staleAge = Routing.EventAge(eventTime: 0, appliedAt: 86_400_001, maxEventAgeSeconds: 86_400)

    /// The quiet rules applied to a reaction's or a member action's common inputs.
    static func common(actor: Bool, access: Bool, stale: Bool, quiet: Quiet) -> Routing.Common {
        var common = Routing.Common()
        common.isActor = actor
        common.hasAccess = access
        common.age = stale ? staleAge : nil
        common.now = 1_000_000
        switch quiet {
        case .none: break
        case .muted: common.mutedUntil = 2_000_000
        case .dnd: common.preferences.dndEnabled = true
        case .outsideSchedule:
            common.preferences.schedule.days[2] = .init(from: 900, to: 1700, dnd: false)
            common.localTime = LocalTime(weekday: 2, hhmm: 2000)
        }
        return common
    }

    static func quietCode(_ quiet: Quiet) -> String? {
        switch quiet {
        case .none: nil
        case .muted: "MUTE_PREFERENCE"
        case .dnd: "DND_PREFERENCE"
        case .outsideSchedule: "SCHEDULE_PREFERENCE"
        }
    }

    @Test("reactions: reactor × access × stale × every reactions value × own message × reply × subscription × quiet rule")
    func reactionsExhaustive() {
        var checked = 0
        for actor in [false, true] {
            for access in [false, true] {
                for stale in [false, true] {
                    for preference in ReactionsPreference.allCases {
                        for wrote in [false, true] {
                            for reply in [false, true] {
                                for subscription in [Routing.SubscriptionState.subscribed, .unsubscribed, .none] {
                                    for quiet in Quiet.allCases {
                                        var input = Routing.ReactionInput()
                                        input.common = Self.common(actor: actor, access: access, stale: stale, quiet: quiet)
                                        input.reactions = preference
                                        input.wroteMessage = wrote
                                        input.onReply = reply
                                        input.subscription = subscription
                                        // SPEC §11.2 as a table, independently of decide's control flow.
                                        let ruled: [String: String?] = [
                                            "DONT_SUBSCRIBE": "REACTIONS_PREFERENCE",
                                            "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES": wrote ? nil : "REACTIONS_PREFERENCE",
                                            "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES": reply && subscription == .unsubscribed && !wrote ? "UNSUBSCRIBED" : nil,
                                        ]
                                        let want = actor ? "SENDER" : !access ? "NO_ACCESS" : stale ? "STALE"
                                            : (ruled[preference.rawValue]!) ?? Self.quietCode(quiet)
                                            ?? (wrote ? "reactionOnOwnMessage" : "reactionOnMessage")
                                        let got = Routing.decide(input)
                                        #expect(got.code == want, "actor \(actor) access \(access) stale \(stale) \(preference) wrote \(wrote) reply \(reply) \(subscription) \(quiet)")
                                        #expect(got.notified == want.first!.isLowercase)
                                        checked += 1
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(checked == 2 * 2 * 2 * ReactionsPreference.allCases.count * 2 * 2 * 3 * Quiet.allCases.count)
    }

    @Test("member actions: subject or actor × access × stale × every action × preference × quiet rule")
    func memberActionsExhaustive() {
        var checked = 0
        for actor in [false, true] {
            for access in [false, true] {
                for stale in [false, true] {
                    for action in MemberAction.allCases {
                        for preference in MemberActionPreference.allCases {
                            for quiet in Quiet.allCases {
                                var input = Routing.MemberActionInput()
                                input.common = Self.common(actor: actor, access: access, stale: stale, quiet: quiet)
                                input.action = action
                                input.preference = preference
                                let want = actor ? "SENDER" : !access ? "NO_ACCESS" : stale ? "STALE"
                                    : preference == .dontSubscribe ? "GROUP_ACTIONS_PREFERENCE" : Self.quietCode(quiet) ?? "memberAction"
                                let got = Routing.decide(input)
                                #expect(got.code == want, "actor \(actor) access \(access) stale \(stale) \(action) \(preference) \(quiet)")
                                if got.notified { #expect(got.steps.last == "notify: memberAction") }
                                checked += 1
                            }
                        }
                    }
                }
            }
        }
        #expect(checked == 2 * 2 * 2 * MemberAction.allCases.count * MemberActionPreference.allCases.count * Quiet.allCases.count)
    }
}
