import Foundation
@testable import HeraldTestSupport
import Testing

@Suite("Preferences API", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PreferencesAPITests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func patch(_ path: String, _ app: TestApp, _ body: String) throws -> HTTPResult {
        try client.send("PATCH", path, token: app.serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    @Test("app settings: GET defaults, PATCH merges, DELETE restores; every field is {value, userCanOverride}")
    func settings() throws {
        let app = try environment.makeApp(prefix: "prefs")
        let initial = try client.get("/v1/settings/notifications", token: app.serverKey)
        #expect(initial.status == 200)
        let replies = (initial.json["groupPreferences"] as? [String: Any])?["replies"] as? [String: Any]
        #expect(replies?["value"] as? String == "SUBSCRIBE_TO_ALL")
        #expect(replies?["userCanOverride"] as? Bool == true)
        #expect(initial.json["largeGroupThreshold"] as? Int == 1000)
        let changed = try patch("/v1/settings/notifications", app,
                                #"{"groupPreferences": {"replies": {"value": "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "userCanOverride": false}}, "bypassPreferencesForAll": true}"#)
        #expect(changed.status == 200)
        let after = try client.get("/v1/settings/notifications", token: app.serverKey)
        #expect(((after.json["groupPreferences"] as? [String: Any])?["replies"] as? [String: Any])?["userCanOverride"] as? Bool == false)
        #expect(after.json["bypassPreferencesForAll"] as? Bool == true)
        let invalid = try patch("/v1/settings/notifications", app, #"{"bypassPreferencesForMentions": true, "largeGroupThreshold": 0}"#)
        #expect(invalid.status == 400)
        #expect(invalid.errorCode == "ERR_INVALID_PREFERENCE")
        #expect(try client.get("/v1/settings/notifications", token: app.serverKey).json["bypassPreferencesForMentions"] as? Bool == false)
        let reset = try client.delete("/v1/settings/notifications", token: app.serverKey)
        #expect(reset.json["bypassPreferencesForAll"] as? Bool == false)
        #expect(try client.get("/v1/settings/notifications", token: app.serverKey).json["bypassPreferencesForAll"] as? Bool == false)
        #expect(try client.get("/v1/settings/notifications", token: app.workerKey).status == 403)
    }

    @Test("user preferences: the effective view; non-overridable fields ignored; invalid saves nothing; DELETE resets")
    func userPreferences() throws {
        let app = try environment.makeApp(prefix: "prefs")
        _ = try patch("/v1/settings/notifications", app, #"{"groupPreferences": {"replies": {"value": "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "userCanOverride": false}}}"#)
        let changed = try patch("/v1/users/bob/preferences", app,
                                #"{"groupPreferences": {"replies": 2, "messages": 3}, "timezone": "Europe/Paris"}"#)
        #expect(changed.status == 200)
        let group = changed.json["groupPreferences"] as? [String: Any]
        #expect(group?["replies"] as? String == "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "silently ignored")
        #expect(group?["messages"] as? String == "SUBSCRIBE_TO_MENTIONS")
        #expect(changed.json["timezone"] as? String == "Europe/Paris")
        let invalid = try patch("/v1/users/bob/preferences", app, #"{"timezone": "Asia/Tokyo", "oneOnOnePreferences": {"replies": "NOPE"}}"#)
        #expect(invalid.status == 400)
        #expect(invalid.errorCode == "ERR_INVALID_PREFERENCE")
        #expect(invalid.errorParams["field"] as? String == "oneOnOnePreferences.replies")
        let current = try client.get("/v1/users/bob/preferences", token: app.serverKey)
        #expect(current.json["timezone"] as? String == "Europe/Paris", "nothing saved")
        #expect(current.json["sources"] == nil)
        // ?include=sources: the user's where the user set it and the app lets them; the app's elsewhere
        // (replies was set by bob but may not be overridden).
        let sources = try client.get("/v1/users/bob/preferences?include=sources", token: app.serverKey).json["sources"] as? [String: String]
        #expect(sources?["groupPreferences.messages"] == "user")
        #expect(sources?["timezone"] == "user")
        #expect(sources?["groupPreferences.replies"] == "app")
        #expect(sources?["oneOnOnePreferences.messages"] == "app")
        #expect(sources?.count == 20)   // every field of SPEC §7.1, replyDigestSeconds (§17) included
        #expect(try client.get("/v1/users/bob/preferences?include=nope", token: app.serverKey).status == 400)
        let reset = try client.delete("/v1/users/bob/preferences", token: app.serverKey)
        #expect(reset.json["timezone"] as? String == "UTC")
        #expect((reset.json["groupPreferences"] as? [String: Any])?["messages"] as? String == "SUBSCRIBE_TO_ALL")
        let notJSON = try patch("/v1/users/bob/preferences", app, "{")
        #expect(notJSON.status == 400)
    }

    @Test("mutes: PUT adds or updates, DELETE removes, expired mutes are not listed, one invalid entry saves nothing")
    func mutes() throws {
        let app = try environment.makeApp(prefix: "mutes")
        let later = nowMilliseconds() + 3_600_000
        let put = try client.send("PUT", "/v1/users/bob/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                  body: Array(#"{"conversations": [{"id": "g1", "type": "group", "until": \#(later)}, {"id": "alice", "type": "oneOnOne", "until": \#(later + 1)}]}"#.utf8))
        #expect(put.status == 200)
        #expect((put.json["conversations"] as? [[String: Any]])?.count == 2)
        let invalid = try client.send("PUT", "/v1/users/bob/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"conversations": [{"id": "g2", "type": "group", "until": \#(later)}, {"id": "g3", "type": "channel", "until": \#(later)}]}"#.utf8))
        #expect(invalid.status == 400)
        #expect(invalid.errorParams["field"] as? String == "conversations[1].type")
        #expect((try client.get("/v1/users/bob/mutes", token: app.serverKey).json["conversations"] as? [Any])?.count == 2)
        let removed = try client.send("DELETE", "/v1/users/bob/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"conversations": [{"id": "g1", "type": "group"}]}"#.utf8))
        #expect((removed.json["conversations"] as? [[String: Any]])?.map { $0["id"] as? String } == ["alice"])
        try environment.connection().query("UPDATE user_mutes SET until = 1 WHERE app = \(app.id)")
        #expect((try client.get("/v1/users/bob/mutes", token: app.serverKey).json["conversations"] as? [Any])?.isEmpty == true)
    }
}
