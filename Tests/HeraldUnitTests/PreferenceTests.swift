import HTTPServer
import JSON
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Testing

@Suite("Preferences")
struct PreferenceTests {
    func json(_ text: String) throws -> JSONValue { try JSONParser.parse(Array(text.utf8)) }

    @Test("defaults are SPEC §7.1, every field overridable")
    func defaults() {
        let view = UserPreferences().effectiveJSON(app: .defaults)
        #expect(view["groupPreferences"]?["replies"] == "SUBSCRIBE_TO_ALL")
        #expect(view["groupPreferences"]?["memberLeft"] == "DONT_SUBSCRIBE")
        #expect(view["oneOnOnePreferences"]?["reactions"] == "SUBSCRIBE_TO_REACTIONS_ON_OWN_MESSAGES")
        #expect(view["mutePreferences"]?["dnd"] == "DISABLED")
        #expect(view["timezone"] == "UTC")
        #expect(view["usePrivacyTemplate"] == false)
        #expect(AppSettings.defaults.entry("groupPreferences.replies").userCanOverride)
        #expect(AppSettings.defaults.json["largeGroupThreshold"] == 1000)
        #expect(AppSettings.defaults.json["privacyTemplateMode"] == "USER_CHOICE")
    }

    @Test("a field the app does not let users override is ignored, kept, and applies again when allowed")
    func overrides() throws {
        var app = AppSettings.defaults
        try app.apply(patch: try json(#"{"groupPreferences": {"replies": {"value": "SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}}"#))
        var user = UserPreferences()
        try user.apply(patch: try json(#"{"groupPreferences": {"replies": "SUBSCRIBE_TO_MENTIONS"}}"#), app: app)
        #expect(user.effective("groupPreferences.replies", app: app) == "SUBSCRIBE_TO_MENTIONS")
        try app.apply(patch: try json(#"{"groupPreferences": {"replies": {"userCanOverride": false}}}"#))
        #expect(user.effective("groupPreferences.replies", app: app) == "SUBSCRIBE_TO_SUBSCRIBED_THREADS")
        try user.apply(patch: try json(#"{"groupPreferences": {"replies": "DONT_SUBSCRIBE"}}"#), app: app)
        #expect(user.values["groupPreferences.replies"] == "SUBSCRIBE_TO_MENTIONS", "ignored, and the earlier choice stays stored")
        try app.apply(patch: try json(#"{"groupPreferences": {"replies": {"userCanOverride": true}}}"#))
        #expect(user.effective("groupPreferences.replies", app: app) == "SUBSCRIBE_TO_MENTIONS", "applies again")
    }

    @Test("CometChat integer codes are aliases of the enum names")
    func aliases() throws {
        var user = UserPreferences()
        try user.apply(patch: try json(#"{"groupPreferences": {"messages": 1, "replies": 4, "quotedReplies": 4, "reactions": 3, "memberJoined": 2}, "mutePreferences": {"dnd": 2}}"#), app: .defaults)
        #expect(user.values["groupPreferences.messages"] == "DONT_SUBSCRIBE")
        #expect(user.values["groupPreferences.replies"] == "SUBSCRIBE_TO_SUBSCRIBED_THREADS")
        #expect(user.values["groupPreferences.quotedReplies"] == "SUBSCRIBE_TO_QUOTES_ON_OWN_MESSAGES")
        #expect(user.values["groupPreferences.reactions"] == "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES")
        #expect(user.values["groupPreferences.memberJoined"] == "SUBSCRIBE")
        #expect(user.values["mutePreferences.dnd"] == "ENABLED")
    }

    @Test("invalid values are rejected with the field's path and nothing is saved", arguments: [
        (#"{"groupPreferences": {"messages": "SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}"#, "groupPreferences.messages"),
        (#"{"groupPreferences": {"replies": 5}}"#, "groupPreferences.replies"),
        (#"{"groupPreferences": {"replies": "subscribe_to_all"}}"#, "groupPreferences.replies"),
        (#"{"oneOnOnePreferences": {"memberLeft": "SUBSCRIBE"}}"#, "oneOnOnePreferences.memberLeft"),
        (#"{"timezone": "Mars/Olympus"}"#, "timezone"),
        (#"{"timezone": "../../etc/passwd"}"#, "timezone"),
        (#"{"usePrivacyTemplate": "yes"}"#, "usePrivacyTemplate"),
        (#"{"mutePreferences": {"schedule": {"monday": {"from": 1800, "to": 900}}}}"#, "mutePreferences.schedule.monday.from"),
        (#"{"mutePreferences": {"schedule": {"monday": {"from": 960}}}}"#, "mutePreferences.schedule.monday.from"),
        (#"{"mutePreferences": {"schedule": {"funday": {"from": 0}}}}"#, "mutePreferences.schedule.funday"),
        (#"{"colour": "blue"}"#, "colour"),
    ])
    func invalid(body: String, field: String) throws {
        var user = UserPreferences(values: ["timezone": "Europe/Paris"])
        let before = user
        // A valid field next to the invalid one must not be saved either.
        let valid = body.contains("timezone") ? #""usePrivacyTemplate": true, "# : #""timezone": "Asia/Tokyo", "#
        let patch = try json("{" + valid + body.dropFirst())
        do {
            try user.apply(patch: patch, app: .defaults)
            Issue.record("accepted \(body)")
        } catch {
            #expect(error.code == "ERR_INVALID_PREFERENCE")
            #expect(error.params["field"] == .string(field))
        }
        #expect(user == before, "nothing saved, not even the valid field next to it")
    }

    @Test("a schedule window across midnight is written on two days and judged in the user's time zone")
    func scheduleAcrossMidnight() throws {
        var user = UserPreferences()
        // Quiet from 22:00 Monday to 07:00 Tuesday in New York: deliver Monday 07:00-21:59, Tuesday 07:00-…
        try user.apply(patch: try json("""
            {"timezone": "America/New_York",
             "mutePreferences": {"schedule": {"monday": {"from": 700, "to": 2159}, "tuesday": {"from": 700, "to": 2359}}}}
            """), app: .defaults)
        let preferences = Routing.Preferences(EffectivePreferences(user: user, app: .defaults), type: .group)
        #expect(preferences.timezone == "America/New_York")
        // 2026-12-01 is a Tuesday. 03:30 UTC Tuesday = 22:30 Monday in New York (EST, UTC-5): quiet.
        let mondayNight = LocalTime(epochMilliseconds: 1_796_095_800_000, timeZone: "America/New_York")
        #expect(mondayNight == LocalTime(weekday: 0, hhmm: 2230))
        #expect(!preferences.schedule.allows(weekday: mondayNight.weekday, hhmm: mondayNight.hhmm))
        // 11:30 UTC Tuesday = 06:30 in New York: still quiet; 12:30 UTC = 07:30: delivered.
        let early = LocalTime(epochMilliseconds: 1_796_124_600_000, timeZone: "America/New_York")
        #expect(early == LocalTime(weekday: 1, hhmm: 630))
        #expect(!preferences.schedule.allows(weekday: early.weekday, hhmm: early.hhmm))
        let morning = LocalTime(epochMilliseconds: 1_796_128_200_000, timeZone: "America/New_York")
        #expect(preferences.schedule.allows(weekday: morning.weekday, hhmm: morning.hhmm))
        // The same instant in UTC is Tuesday 12:30.
        #expect(LocalTime(epochMilliseconds: 1_796_128_200_000, timeZone: "UTC") == LocalTime(weekday: 1, hhmm: 1230))
    }

    @Test("app settings: switches validated, PATCH merges, invalid changes nothing")
    func appSwitches() throws {
        var app = AppSettings.defaults
        try app.apply(patch: try json(#"{"bypassPreferencesForMentions": true, "privacyTemplateMode": "PRIVACY", "largeGroupThreshold": 20000}"#))
        #expect(app.bypassPreferencesForMentions)
        #expect(app.privacyTemplateMode == .privacy)
        #expect(app.largeGroupThreshold == 20000)
        let before = app
        for body in [#"{"largeGroupThreshold": 0}"#, #"{"privacyTemplateMode": "LOUD"}"#, #"{"bypassPreferencesForAll": 1}"#,
                     #"{"bypassPreferencesForAll": true, "groupPreferences": {"replies": {"value": "NOPE"}}}"#] {
            #expect(throws: HTTPError.self) { try app.apply(patch: try json(body)) }
        }
        #expect(app == before)
        #expect(AppSettings(stored: app.json) == app, "stored and read back")
    }

    @Test("effective preferences, typed: the user's where overridable, else the app's, for every field")
    func effective() throws {
        var app = AppSettings.defaults
        try app.apply(patch: try json("""
            {"groupPreferences": {"replies": {"value": "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "userCanOverride": false},
                                  "memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}},
             "oneOnOnePreferences": {"reactions": {"value": "DONT_SUBSCRIBE", "userCanOverride": true}}}
            """))
        var user = UserPreferences()
        try user.apply(patch: try json("""
            {"groupPreferences": {"replies": "SUBSCRIBE_TO_ALL", "messages": "SUBSCRIBE_TO_MENTIONS", "memberLeft": "SUBSCRIBE"},
             "oneOnOnePreferences": {"reactions": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"},
             "mutePreferences": {"dnd": "ENABLED"}, "usePrivacyTemplate": true, "timezone": "Asia/Tokyo"}
            """), app: .defaults)
        let effective = EffectivePreferences(user: user, app: app)
        #expect(effective.group.replies == .subscribeToSubscribedThreads, "not overridable: the app's")
        #expect(effective.group.messages == .subscribeToMentions)
        #expect(effective.group.quotedReplies == .subscribeToAll)
        #expect(effective.group.reactions == .ownMessages)
        #expect(effective.oneOnOne.reactions == .allMessages)
        #expect(effective.memberActions[.joined] == .subscribe, "the app's default")
        #expect(effective.memberActions[.left] == .subscribe, "the user's")
        #expect(effective.memberActions[.kicked] == .dontSubscribe)
        #expect(effective.memberActions.count == MemberAction.allCases.count)
        #expect(effective.dnd == .enabled && effective.usePrivacyTemplate && effective.timezone == "Asia/Tokyo")
        #expect(effective.schedule == .allDay)
        let defaults = EffectivePreferences(app: .defaults)
        #expect(defaults.group.replies == .subscribeToAll && defaults.dnd == .disabled && !defaults.usePrivacyTemplate && defaults.timezone == "UTC")
        // Every member action's raw value is a field of the table.
        #expect(MemberAction.allCases.allSatisfy { PreferenceField.byPath["groupPreferences." + $0.rawValue] != nil })
    }
}
