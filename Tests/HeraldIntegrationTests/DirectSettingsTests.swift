import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Secrets
import Testing

/// SPEC §13.4's settings over HTTP: `delivery.mode: "direct"` and its `apns`, `fcm` and `webpush`
/// blocks; secrets write-only (`privateKeySet`, `serviceAccountSet`), stored apart from the
/// settings, gone with their block; every bad field a 400 naming it, with nothing saved.
@Suite("Direct delivery settings", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DirectSettingsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func patch(_ app: TestApp, _ delivery: [String: Any]) throws -> HTTPResult {
        try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                        body: Array(Events.json(["delivery": delivery]).utf8))
    }

    func credentials(_ app: TestApp) throws -> [String] {
        try environment.connection().query("SELECT kind FROM delivery_credentials WHERE app = \(app.id) ORDER BY kind")
            .map { try $0.decode(0, as: String.self) }
    }

    @Test("write-only keys: shown as privateKeySet/serviceAccountSet, kept out of the settings document, removed with their block")
    func secretsWriteOnly() throws {
        let app = try environment.makeApp(prefix: "directsettings")
        let apnsKey = try #require(PrivateKey.ec(curve: "P-256")), fcmKey = try #require(PrivateKey.rsa(bits: 2048))
        let account = #"{"type": "service_account", "client_email": "push@p.iam.gserviceaccount.com", "private_key": "#
            + "\(String(data: try JSONSerialization.data(withJSONObject: [fcmKey.pkcs8PEM], options: .fragmentsAllowed), encoding: .utf8)!.dropFirst().dropLast())}"
        let response = try patch(app, ["mode": "direct",
                                       "apns": ["teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": apnsKey.pkcs8PEM],
                                       "fcm": ["projectId": "p", "serviceAccount": account],   // the file's text is taken too
                                       "webpush": ["subject": "mailto:ops@example.com"]])
        #expect(response.status == 200, "\(response.text)")
        let delivery = try #require(response.json["delivery"] as? [String: Any])
        #expect(delivery["mode"] as? String == "direct" && delivery["url"] is NSNull)
        #expect((delivery["secret"] as? String)?.hasPrefix("whsec_") == true, "direct mode signs webhook devices")
        let apns = try #require(delivery["apns"] as? [String: Any])
        #expect(apns["privateKeySet"] as? Bool == true && apns["endpoint"] as? String == "https://api.push.apple.com"
                && apns["sandboxEndpoint"] as? String == "https://api.sandbox.push.apple.com" && apns["topic"] is NSNull)
        let fcm = try #require(delivery["fcm"] as? [String: Any])
        #expect(fcm["serviceAccountSet"] as? Bool == true && fcm["clientEmail"] as? String == "push@p.iam.gserviceaccount.com"
                && fcm["tokenUri"] as? String == "https://oauth2.googleapis.com/token" && fcm["endpoint"] as? String == "https://fcm.googleapis.com")
        #expect((delivery["webpush"] as? [String: Any])?["subject"] as? String == "mailto:ops@example.com")
        let read = try client.get("/v1/settings/notifications", token: app.serverKey)
        for text in [response.text, read.text] { #expect(!text.contains("PRIVATE KEY") && !text.contains("private_key")) }
        let stored = try environment.connection().query("SELECT settings::text FROM app_settings WHERE app = \(app.id)")
        let document = try stored[0].decode(0, as: String.self)
        #expect(!document.contains("PRIVATE KEY") && !document.contains("privateKeySet"), "keys live apart from the settings: \(document)")
        #expect(try credentials(app) == ["apns", "fcm"])

        // a later PATCH of a block keeps its key; a new key replaces it; null removes block and key
        let renamed = try patch(app, ["apns": ["topic": "com.example.chat"]])
        #expect(((renamed.json["delivery"] as? [String: Any])?["apns"] as? [String: Any])?["privateKeySet"] as? Bool == true, "\(renamed.text)")
        #expect((renamed.json["delivery"] as? [String: Any])?["secret"] == nil, "the signing secret is shown once")
        let cleared = try patch(app, ["apns": NSNull(), "fcm": NSNull()])
        #expect(cleared.status == 200 && (cleared.json["delivery"] as? [String: Any])?["apns"] is NSNull)
        #expect(try credentials(app).isEmpty)
        #expect(try patch(app, ["apns": ["teamId": "T", "keyId": "K"]]).errorParams["field"] as? String == "delivery.apns.privateKey",
                "a new block needs its key")

        // a reset removes the keys too
        #expect(try patch(app, ["apns": ["teamId": "T", "keyId": "K", "privateKey": apnsKey.pkcs8PEM]]).status == 200)
        #expect(try client.send("DELETE", "/v1/settings/notifications", token: app.serverKey).status == 200)
        #expect(try credentials(app).isEmpty)
    }

    @Test("each bad field of the direct blocks: 400 naming it, nothing saved; internal endpoints refused")
    func badFields() throws {
        let app = try environment.makeApp(prefix: "directsettings")
        let ecKey = try #require(PrivateKey.ec(curve: "P-256")).pkcs8PEM
        let rsaKey = try #require(PrivateKey.rsa(bits: 2048)).pkcs8PEM
        let apns: [String: Any] = ["teamId": "TEAM", "keyId": "KEY", "privateKey": ecKey]
        let fcm: [String: Any] = ["projectId": "p", "serviceAccount": ["client_email": "a@b", "private_key": rsaKey]]
        func with(_ block: [String: Any], _ name: String, _ value: Any) -> [String: Any] {
            var copy = block
            copy[name] = value
            return copy
        }
        let cases: [([String: Any], String)] = [
            (["apns": "yes"], "delivery.apns"),
            (["apns": with(apns, "privateKey", rsaKey)], "delivery.apns.privateKey"),
            (["apns": with(apns, "privateKey", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")], "delivery.apns.privateKey"),
            (["apns": with(apns, "teamId", "")], "delivery.apns.teamId"),
            (["apns": with(apns, "keyId", "a/b")], "delivery.apns.keyId"),
            (["apns": with(apns, "endpoint", "http://api.push.apple.com")], "delivery.apns.endpoint"),
            (["apns": with(apns, "privateKeySet", true)], "delivery.apns.privateKeySet"),
            (["apns": with(apns, "colour", 1)], "delivery.apns.colour"),
            (["fcm": with(fcm, "serviceAccount", ["client_email": "a@b", "private_key": ecKey])], "delivery.fcm.serviceAccount.private_key"),
            (["fcm": with(fcm, "serviceAccount", ["private_key": rsaKey])], "delivery.fcm.serviceAccount.client_email"),
            (["fcm": with(fcm, "serviceAccount", "not json")], "delivery.fcm.serviceAccount"),
            (["fcm": with(fcm, "projectId", 7)], "delivery.fcm.projectId"),
            (["fcm": with(fcm, "clientEmail", "x@y")], "delivery.fcm.clientEmail"),
            (["webpush": ["subject": "ops@example.com"]], "delivery.webpush.subject"),
            (["webpush": [:] as [String: Any]], "delivery.webpush.subject"),
        ]
        for (delivery, field) in cases {
            var body = delivery
            body["mode"] = "direct"
            let refused = try patch(app, body)
            #expect(refused.status == 400 && refused.errorCode == "ERR_INVALID_PREFERENCE" && refused.errorParams["field"] as? String == field,
                    "\(field): \(refused.text)")
            #expect(!refused.text.contains("PRIVATE KEY"), "a key is never echoed")
        }
        let delivery = try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any]
        #expect(delivery?["mode"] as? String == "pull" && delivery?["apns"] is NSNull, "nothing saved")
        #expect(try credentials(app).isEmpty)
    }
}
