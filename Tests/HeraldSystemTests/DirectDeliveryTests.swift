import Foundation
import Glibc
import Postgres
@testable import HeraldTestSupport
import Secrets
import Testing

/// SPEC §13.4 end to end: delivery `mode: "direct"` set through the settings API (secrets
/// write-only), and Herald itself pushing each job to APNs over HTTP/2, FCM (after the OAuth JWT
/// bearer grant), Web Push (RFC 8291 encryption, VAPID) and a webhook device (Standard Webhooks),
/// all stand-ins over TLS behind a test CA (`HERALD_DELIVERY_CA_FILE`) that check what arrives with
/// libraries Herald did not write (scripts/push_receivers.py: h2, PyJWT, http_ece,
/// standardwebhooks). In a database of its own: every Herald on a database delivers its apps'
/// jobs, and the other suites' servers do not trust the test CA.
@Suite("Direct delivery through Herald", .enabled(if: TestEnvironment.hasDatabase && TestEnvironment.pushPython != nil,
                                                   "needs the database and HERALD_TEST_PYTHON (make test sets both)"))
struct DirectDeliveryTests {
    @Test("direct mode: each device pushed once by its protocol, bad tokens removed, a retry only to the devices not sent, tokens renewed")
    func direct() throws {
        let environment = try TestEnvironment.shared()
        let python = try #require(TestEnvironment.pushPython)
        let receivers = try PushReceivers(python: python)
        let apnsKey = receivers.apnsKey, fcmKey = receivers.fcmKey, subscription = receivers.subscription

        try environment.withDatabaseOfItsOwn(prefix: "direct") { databaseURL in
            let server = try ServerProcess(databaseURL: databaseURL, environment: ["HERALD_DELIVERY_CA_FILE": receivers.caFile])
            let client = server.client
            let app = try environment.makeApp(prefix: "direct", client: client)

            // the settings: the secrets go in, and never come out
            #expect(try client.post("/v1/settings/delivery/webpush-keys", token: app.serverKey, json: "").status == 201)
            let apnsEndpoint = receivers.apnsEndpoint, https = receivers.httpsEndpoint
            let delivery: [String: Any] = [
                "mode": "direct", "concurrency": 8, "timeoutMs": 5000,
                "apns": ["teamId": "TEAM123456", "keyId": "KEY1234567", "privateKey": apnsKey.pkcs8PEM, "topic": "com.example.chat",
                         "endpoint": apnsEndpoint, "sandboxEndpoint": apnsEndpoint],
                "fcm": ["projectId": "chat-123", "endpoint": https,
                        "serviceAccount": ["type": "service_account", "client_email": "push@chat-123.iam.gserviceaccount.com",
                                           "private_key": fcmKey.pkcs8PEM, "token_uri": https + "/token"]],
                "webpush": ["subject": "mailto:ops@example.com"],
            ]
            let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey,
                                          headers: ["Content-Type": "application/json"], body: Array(Events.json(["delivery": delivery]).utf8))
            #expect(patched.status == 200, "\(patched.text)")
            let shown = try #require(patched.json["delivery"] as? [String: Any])
            let secret = try #require(shown["secret"] as? String, "direct mode signs webhook devices: its secret is shown once")
            try receivers.trust(webhookSecret: secret)
            #expect((shown["apns"] as? [String: Any])?["privateKeySet"] as? Bool == true)
            #expect((shown["fcm"] as? [String: Any])?["serviceAccountSet"] as? Bool == true)
            #expect((shown["fcm"] as? [String: Any])?["clientEmail"] as? String == "push@chat-123.iam.gserviceaccount.com")
            let read = try client.get("/v1/settings/notifications", token: app.serverKey)
            for text in [patched.text, read.text] {
                #expect(!text.contains("PRIVATE KEY") && !text.contains("privateKey\"") && !text.contains("private_key"), "no secret: \(text)")
            }

            // the devices, and a group: bob has one of each (two with tokens the providers refuse),
            // carol an APNs token that fails once and an FCM one, dave an APNs token whose first
            // provider token is called expired and an FCM one whose first access token is, erin none
            func device(_ uid: String, _ id: String, _ platform: String, _ token: String) throws {
                let response = try client.send("PUT", "/v1/users/\(uid)/devices/\(id)", token: app.serverKey,
                                               headers: ["Content-Type": "application/json"],
                                               body: Array(Events.json(["platform": platform, "token": token]).utf8))
                #expect(response.status == 200, "\(uid)/\(id): \(response.text)")
            }
            try device("bob", "phone", "apns", "a1b2c3")
            try device("bob", "old", "apns", "bad")
            try device("bob", "pixel", "fcm", "fcm-1")
            try device("bob", "gone", "fcm", "gone")
            try device("bob", "browser", "webpush", subscription)
            try device("bob", "hook", "webhook", https + "/hook/bob")
            try device("carol", "phone", "apns", "flaky")
            try device("carol", "pixel", "fcm", "fcm-2")
            try device("dave", "phone", "apns", "expire")
            try device("dave", "pixel", "fcm", "stale")
            #expect(try app.setMembers("g1", ["alice", "bob", "carol", "dave", "erin"], client: client).status == 200)
            try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: nowMilliseconds(), text: "hello")], client: client)

            let connection = try PostgresConnection(connectionString: databaseURL)
            func jobs() throws -> [String: (state: String, attempt: Int)] {
                var found: [String: (String, Int)] = [:]
                for row in try connection.query("SELECT recipient, state, attempt FROM jobs WHERE app = \(app.id)") {
                    found[try row.decode("recipient")] = (try row.decode("state"), try row.decode("attempt"))
                }
                return found
            }
            #expect(eventually(seconds: 30) { ((try? jobs()) ?? [:]).values.filter { $0.state == "acked" }.count == 4 },
                    "\((try? jobs()) ?? [:])")
            let settled = try jobs()
            #expect(settled["bob"]?.attempt == 1 && settled["dave"]?.attempt == 1 && settled["erin"]?.attempt == 1, "\(settled)")
            #expect(settled["carol"]?.attempt == 2, "carol's job was retried once: \(settled)")

            var reports: [[String: Any]] = []
            _ = eventually(seconds: 5) {
                reports = receivers.reports
                return reports.count >= 15
            }
            func paths(_ service: String) -> [String] { reports.filter { $0["service"] as? String == service }.compactMap { $0["path"] as? String } }
            for report in reports {
                #expect(report["ok"] as? Bool == true, "\(report["service"] ?? "") refused: \(report["error"] ?? "") \(report["path"] ?? "")")
            }
            #expect(paths("apns").sorted() == ["/3/device/a1b2c3", "/3/device/bad", "/3/device/expire", "/3/device/expire",
                                               "/3/device/flaky", "/3/device/flaky"],
                    "the flaky token twice (503, then the retry), the expired one twice (403, then a new token): \(paths("apns"))")
            #expect(paths("fcm-token").count == 2, "one access token, reused, and one more after the 401")
            let fcmTokens = reports.filter { $0["service"] as? String == "fcm" }.compactMap { ($0["body"] as? String)?.firstMatch(of: /"token":"([^"]+)"/)?.1 }
            #expect(fcmTokens.map(String.init).sorted() == ["fcm-1", "fcm-2", "gone", "stale", "stale"],
                    "each once, stale again after the renewal: carol's retry went only to her phone (\(fcmTokens))")
            #expect(paths("webpush") == ["/push/1"] && paths("webhook") == ["/hook/bob"])
            let expired = reports.filter { $0["path"] as? String == "/3/device/expire" }
                .compactMap { ($0["headers"] as? [String: Any])?["authorization"] as? String }
            #expect(expired.count == 2 && expired[0] != expired[1], "a new provider token after ExpiredProviderToken")
            let tokens = Set(reports.filter { $0["service"] as? String == "apns" && $0["path"] as? String != "/3/device/expire" }
                .compactMap { ($0["headers"] as? [String: Any])?["authorization"] as? String })
            #expect(tokens.count <= 2, "the provider token is reused across pushes")
            let alert = try #require(reports.first { $0["path"] as? String == "/3/device/a1b2c3" })
            let headers = alert["headers"] as? [String: Any] ?? [:]
            #expect(headers["apns-topic"] as? String == "com.example.chat" && headers["apns-push-type"] as? String == "alert")
            #expect(headers["apns-collapse-id"] as? String == "m1" && headers["apns-priority"] as? String == "10")
            let decrypted = try #require(reports.first { $0["service"] as? String == "webpush" }?["body"] as? String)
            #expect(decrypted.contains("\"recipient\":\"bob\"") && !decrypted.contains("\"devices\""), "the browser read the job: \(decrypted)")

            // the refused tokens' devices are gone, the others stay
            let bobDevices = try client.get("/v1/users/bob/devices", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
            #expect(Set(bobDevices.compactMap { $0["id"] as? String }) == ["phone", "pixel", "browser", "hook"])

            let metrics = try client.get("/metrics").text
            for series in [#"{outcome="sent",status="2xx",platform="apns"}"#, #"{outcome="removed",status="4xx",platform="apns"}"#,
                           #"{outcome="renew",status="4xx",platform="apns"}"#, #"{outcome="retry",status="5xx",platform="apns"}"#,
                           #"{outcome="sent",status="2xx",platform="fcm"}"#, #"{outcome="removed",status="4xx",platform="fcm"}"#,
                           #"{outcome="sent",status="2xx",platform="webpush"}"#, #"{outcome="sent",status="2xx",platform="webhook"}"#] {
                #expect(metrics.contains("herald_delivery_attempts_total" + series), "\(series)")
            }
            #expect(metrics.contains(#"herald_delivery_attempts_total{outcome="renew",status="4xx",platform="fcm"}"#))
            #expect(metrics.contains(#"herald_delivery_duration_seconds_count{platform="apns"}"#))

            // a platform without its block is skipped and counted; the job is still acked
            let removed = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                          body: Array(Events.json(["delivery": ["fcm": NSNull()]]).utf8))
            #expect(removed.status == 200 && (removed.json["delivery"] as? [String: Any])?["fcm"] is NSNull, "\(removed.text)")
            let stored = try connection.query("SELECT kind FROM delivery_credentials WHERE app = \(app.id) ORDER BY kind")
            #expect(try stored.map { try $0.decode(0, as: String.self) } == ["apns", "vapid"], "the FCM key went with its block")
            try app.ingest([Events.message("e2", id: "m2", sender: "alice", at: nowMilliseconds(), text: "again")], client: client)
            #expect(eventually(seconds: 20) { ((try? jobs()) ?? [:]).count == 4 && (try? connection.query(
                "SELECT 1 FROM jobs WHERE app = \(app.id) AND state <> 'acked'").isEmpty) == true })
            #expect(eventually(seconds: 5) {
                ((try? client.get("/metrics").text) ?? "").contains(#"herald_delivery_attempts_total{outcome="no_credentials",status="none",platform="fcm"}"#)
            })

            server.signal(SIGTERM)
            _ = server.wait()
            let log = server.output.all.joined(separator: "\n")
            #expect(!log.contains("PRIVATE KEY") && !log.contains("ya29.") && !log.contains(secret), "no credential in the log")
        }
    }
}
