import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import HTTPServer
@testable import HeraldTestSupport
import Secrets
import Testing

/// SPEC §13.3 over HTTP against real local receivers: the `delivery` setting and its secret,
/// Standard Webhooks signatures (and rotation), what each answer does to a job, gorush's format
/// and failed tokens, metrics, and two instances sharing one app's delivery.
@Suite("Delivery", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DeliveryTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func app(members: [String]) throws -> TestApp {
        try environment.makeApp(prefix: "delivery", members: members, joinedAt: past - 100_000)
    }

    func patch(_ app: TestApp, _ body: Any) throws -> HTTPResult {
        try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                        body: Array(Events.json(body).utf8))
    }

    /// Turns webhook delivery on; returns the secret.
    func webhook(_ app: TestApp, _ url: String, mode: String = "webhook", timeoutMs: Int = 5000, concurrency: Int = 8) throws -> String {
        let response = try patch(app, ["delivery": ["mode": mode, "url": url, "timeoutMs": timeoutMs, "concurrency": concurrency]])
        #expect(response.status == 200, "\(response.text)")
        return try #require((response.json["delivery"] as? [String: Any])?["secret"] as? String)
    }

    func stats(_ app: TestApp) throws -> [String: Int] {
        try client.get("/v1/jobs/stats", token: app.workerKey).json as? [String: Int] ?? [:]
    }

    func jobRows(_ app: TestApp) throws -> [(state: String, attempt: Int, error: String?)] {
        try environment.connection().query("SELECT state, attempt, last_error FROM jobs WHERE app = \(app.id) ORDER BY id").map {
            (try $0.decode(0), try $0.decode(1), try $0.decode(2))
        }
    }

    /// Standard Webhooks: base64(HMAC-SHA256(secret bytes, "id.timestamp.body")).
    static func sign(secret: String, id: String, timestamp: String, body: [UInt8]) -> String {
        let key = Array(Data(base64Encoded: String(secret.dropFirst("whsec_".count)))!)
        return "v1," + Data(Secrets.hmacSHA256(key: key, message: Array("\(id).\(timestamp).".utf8) + body)).base64EncodedString()
    }

    @Test("the delivery setting: a secret shown once, secretSet afterwards, 400s naming the field, rotation, reset")
    func settings() throws {
        let app = try environment.makeApp(prefix: "delivery")
        let initial = try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any]
        #expect(initial?["mode"] as? String == "pull" && initial?["secretSet"] as? Bool == false && initial?["url"] is NSNull)
        for (body, field) in [(["mode": "smtp"], "delivery.mode"), (["mode": "webhook"], "delivery.url"),
                              (["mode": "webhook", "url": "ftp://x"], "delivery.url"),
                              (["mode": "webhook", "url": "http://"], "delivery.url"),
                              (["mode": "webhook", "url": "http://a b"], "delivery.url"),
                              (["url": "http://x", "timeoutMs": 50], "delivery.timeoutMs"),
                              (["url": "http://x", "concurrency": 65], "delivery.concurrency"),
                              (["secret": "whsec_AAAA"], "delivery.secret"), (["colour": 1], "delivery.colour")] as [([String: Any], String)] {
            let refused = try patch(app, ["delivery": body])
            #expect(refused.status == 400 && refused.errorCode == "ERR_INVALID_PREFERENCE" && refused.errorParams["field"] as? String == field,
                    "\(body): \(refused.text)")
        }
        let unchanged = try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any]
        #expect(unchanged?["mode"] as? String == "pull" && unchanged?["url"] is NSNull, "a refused PATCH saves nothing")
        let secret = try webhook(app, "http://127.0.0.1:9/hook", timeoutMs: 1000, concurrency: 2)
        #expect(secret.hasPrefix("whsec_") && Data(base64Encoded: String(secret.dropFirst(6)))?.count == 32)
        let shown = try #require(try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any])
        #expect(shown["secret"] == nil && shown["secretSet"] as? Bool == true && shown["mode"] as? String == "webhook")
        #expect(shown["timeoutMs"] as? Int == 1000 && shown["concurrency"] as? Int == 2 && shown["url"] as? String == "http://127.0.0.1:9/hook")
        let stored = try environment.connection().query("SELECT settings->'delivery' ? 'secretSet' FROM app_settings WHERE app = \(app.id)")
        #expect(try stored[0].decode(0, as: Bool.self) == false, "secretSet is read from the secrets, not stored")
        let again = try patch(app, ["delivery": ["concurrency": 3]])
        #expect((again.json["delivery"] as? [String: Any])?["secret"] == nil, "the secret is shown once")
        let later = try client.get("/v1/settings/notifications", token: app.serverKey).text
        #expect(!again.text.contains(secret) && !later.contains(secret))

        let rotated = try client.post("/v1/settings/delivery/rotate-secret", token: app.serverKey, json: "")
        let next = try #require(rotated.json["secret"] as? String)
        #expect(rotated.status == 200 && next != secret && next.hasPrefix("whsec_"))
        #expect(try client.post("/v1/settings/delivery/rotate-secret", token: app.workerKey, json: "").status == 403)
        #expect(!environment.logs.all.contains { $0.contains(secret) || $0.contains(next) }, "no secret in a log")

        #expect(try client.delete("/v1/settings/notifications", token: app.serverKey).status == 200)
        let reset = try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any]
        #expect(reset?["mode"] as? String == "pull" && reset?["secretSet"] as? Bool == false)
        let count = try environment.connection().query("SELECT count(*) FROM delivery_secrets WHERE app = \(app.id)")
        #expect(try count[0].decode(0, as: Int.self) == 0, "a reset removes the secrets")
    }

    @Test("webhook: each job POSTed once with Standard Webhooks headers that verify, acked; a rotation signs with both secrets")
    func signedAndAcked() throws {
        let receiver = try Receiver()
        defer { receiver.stop() }
        let app = try app(members: ["alice", "bob", "carol"])
        let secret = try webhook(app, receiver.url)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        #expect(try eventually { try receiver.deliveries.count >= 2 && (try stats(app))["leased"] == 0 })
        let deliveries = receiver.deliveries
        #expect(deliveries.count == 2, "one per recipient: bob and carol")
        #expect(Set(deliveries.compactMap { $0.json["recipient"] as? String }) == ["bob", "carol"])
        for delivery in deliveries {
            let id = try #require(delivery.headers["webhook-id"])
            let timestamp = try #require(delivery.headers["webhook-timestamp"])
            #expect(delivery.json["id"] as? String == id && delivery.json["attempt"] as? Int == 1)
            #expect(abs((Int64(timestamp) ?? 0) - nowMilliseconds() / 1000) < 60)
            #expect(delivery.headers["webhook-signature"] == Self.sign(secret: secret, id: id, timestamp: timestamp, body: delivery.body))
            #expect(delivery.headers["content-type"] == "application/json")
            #expect((delivery.json["notification"] as? [String: Any])?["body"] as? String == "hello")
        }
        #expect(try jobRows(app).allSatisfy { $0.state == "acked" && $0.attempt == 1 })

        let next = try #require(try client.post("/v1/settings/delivery/rotate-secret", token: app.serverKey, json: "").json["secret"] as? String)
        try app.ingest([Events.message("e2", id: "m2", sender: "alice", at: past + 1, text: "again")], client: client)
        #expect(eventually { receiver.deliveries.count >= 4 })
        let rotated = try #require(receiver.deliveries.last)
        let id = rotated.headers["webhook-id"] ?? "", timestamp = rotated.headers["webhook-timestamp"] ?? ""
        #expect(rotated.headers["webhook-signature"] == Self.sign(secret: next, id: id, timestamp: timestamp, body: rotated.body) + " "
                    + Self.sign(secret: secret, id: id, timestamp: timestamp, body: rotated.body), "new first, then the old one for 24 h")
    }

    @Test("500 then 200 and 429 with Retry-After retry and are acked once; 410 is dead, requeued it is delivered")
    func answers() throws {
        let receiver = try Receiver { delivery, earlier in
            let recipient = delivery.json["recipient"] as? String
            return switch (recipient, earlier.filter { $0.json["recipient"] as? String == recipient }.count) {
            case ("bob", 0): Response(status: 500)
            case ("carol", 0): Response(status: 429, headers: [("Retry-After", "2")])
            case ("dave", 0): Response(status: 410)
            default: Response(status: 200)
            }
        }
        defer { receiver.stop() }
        let app = try app(members: ["alice", "bob", "carol", "dave"])
        _ = try webhook(app, receiver.url)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        #expect(try eventually(seconds: 20) { try receiver.deliveries.count >= 5 && (try stats(app))["dead"] == 1 && (try stats(app))["retrying"] == 0 && (try stats(app))["leased"] == 0 })
        let byRecipient = Dictionary(grouping: receiver.deliveries) { $0.json["recipient"] as? String ?? "" }
        #expect(byRecipient["bob"]?.map { $0.json["attempt"] as? Int } == [1, 2])
        let carol = try #require(byRecipient["carol"])
        #expect(carol.map { $0.json["attempt"] as? Int } == [1, 2])
        if carol.count == 2 { #expect(carol[1].at.timeIntervalSince(carol[0].at) >= 1.8, "Retry-After: 2 is honoured") }
        #expect(Set((byRecipient["bob"] ?? []).map(\.id)).count == 1, "the same webhook-id on every attempt")
        #expect(byRecipient["dave"]?.count == 1, "410 is permanent: no retry")
        let dead = try client.get("/v1/jobs/dead", token: app.workerKey).json["data"] as? [[String: Any]] ?? []
        #expect(dead.count == 1 && dead.first?["recipient"] as? String == "dave" && dead.first?["lastError"] as? String == "HTTP 410")

        let requeued = try client.post("/v1/jobs/dead/requeue", token: app.workerKey, json: Events.json(["ids": dead.compactMap { $0["id"] }]))
        #expect(requeued.json["requeued"] as? Int == 1)
        #expect(try eventually { try byRecipientCount(receiver, "dave") == 2 && (try jobRows(app)).allSatisfy { $0.state == "acked" } })
        #expect(try jobRows(app).count == 3)
    }

    func byRecipientCount(_ receiver: Receiver, _ uid: String) -> Int {
        receiver.deliveries.filter { $0.json["recipient"] as? String == uid }.count
    }

    @Test("a receiver that times out, then one that is down for a while: retried until delivered, once each")
    func timeoutsAndOutages() throws {
        let slow = try Receiver { _, earlier in
            if earlier.isEmpty { usleep(1_500_000) }
            return Response(status: 200)
        }
        defer { slow.stop() }
        let app = try app(members: ["alice", "bob"])
        _ = try webhook(app, slow.url, timeoutMs: 300)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        #expect(try eventually(seconds: 20) { try jobRows(app).first?.state == "acked" })
        #expect(try jobRows(app).map(\.attempt) == [2], "the first attempt timed out")
        #expect(slow.deliveries.map { $0.json["attempt"] as? Int } == [1, 2])

        // Down: connections to the port are refused; then a receiver comes up on it. (An app of
        // its own: another instance — the two-instance test's — may still hold an app's old URL
        // for up to the 2 s between its reads of the settings.)
        let down = try DownPort()
        let port = down.port
        let other = try self.app(members: ["alice", "bob"])
        _ = try webhook(other, "http://127.0.0.1:\(port)/hook", timeoutMs: 1000)
        try other.ingest([Events.message("e2", id: "m2", sender: "alice", at: past + 1, text: "later")], client: client)
        #expect(try eventually(seconds: 20) { try jobRows(other).last.map { $0.attempt >= 2 && $0.error?.contains("connection failed") == true } ?? false })
        down.comeUp()
        defer { down.stop() }
        #expect(try eventually(seconds: 30) { try jobRows(other).last?.state == "acked" })
        #expect(down.requests == 1, "delivered once when the receiver is back")
    }

    @Test("invalidDevices in a receiver's 2xx body removes those devices")
    func invalidDevices() throws {
        let receiver = try Receiver { _, _ in Response(status: 200, body: Array(#"{"invalidDevices": ["old"]}"#.utf8)) }
        defer { receiver.stop() }
        let app = try app(members: ["alice", "bob"])
        for id in ["old", "new"] {
            #expect(try client.send("PUT", "/v1/users/bob/devices/\(id)", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                    body: Array(Events.json(["platform": "fcm", "token": "tok-\(id)"]).utf8)).status == 200)
        }
        _ = try webhook(app, receiver.url)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        #expect(try eventually { try jobRows(app).first?.state == "acked" })
        let devices = receiver.deliveries.first?.json["devices"] as? [[String: Any]] ?? []
        #expect(devices.compactMap { $0["id"] as? String } == ["old", "new"], "the job carried both devices")
        let left = try client.get("/v1/users/bob/devices", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        #expect(left.compactMap { $0["id"] as? String } == ["new"])
    }

    @Test("gorush: one notification per platform in /api/push's format; failed-push tokens are removed; no device, no request")
    func gorush() throws {
        let receiver = try Receiver { delivery, _ in
            let tokens = ((delivery.json["notifications"] as? [[String: Any]]) ?? []).flatMap { $0["tokens"] as? [String] ?? [] }
            let logs = tokens.filter { $0.hasPrefix("dead") }.map { ["type": "failed-push", "platform": "ios", "token": $0, "error": "Unregistered"] }
            return Response(status: 200, body: Array(Events.json(["counts": tokens.count, "logs": logs, "success": "ok"]).utf8))
        }
        defer { receiver.stop() }
        let app = try app(members: ["alice", "bob", "carol"])
        for (uid, id, platform, token) in [("bob", "iphone", "apns", "dead-1"), ("bob", "ipad", "apns", "live-2"), ("bob", "pixel", "fcm", "live-3"),
                                           ("bob", "browser", "webpush", Events.webPushToken("https://push.example/1")),
                                           ("carol", "browser", "webpush", Events.webPushToken("https://push.example/2"))] {
            var body: [String: Any] = ["platform": platform, "token": token]
            if platform == "apns" { body["topic"] = "com.example.chat" }
            #expect(try client.send("PUT", "/v1/users/\(uid)/devices/\(id)", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                    body: Array(Events.json(body).utf8)).status == 200)
        }
        _ = try webhook(app, receiver.url + "/api/push", mode: "gorush")
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        #expect(try eventually { try jobRows(app).allSatisfy { $0.state == "acked" } })
        #expect(receiver.deliveries.count == 1, "carol has no device gorush serves: her job is acked without a request")
        let notifications = receiver.deliveries.first?.json["notifications"] as? [[String: Any]] ?? []
        #expect(notifications.count == 2)
        let ios = try #require(notifications.first { $0["platform"] as? Int == 1 })
        #expect(ios["tokens"] as? [String] == ["dead-1", "live-2"] && ios["topic"] as? String == "com.example.chat")
        #expect(ios["title"] as? String == "alice @ g1" && ios["message"] as? String == "hello" && ios["collapse_id"] as? String == "m1")
        #expect(ios["badge"] is Int)
        let android = try #require(notifications.first { $0["platform"] as? Int == 2 })
        #expect(android["tokens"] as? [String] == ["live-3"] && (android["android"] as? [String: Any])?["collapse_key"] as? String == "m1")
        #expect(ios["sound"] as? String == "default")
        #expect((android["data"] as? [String: Any])?["messageId"] as? String == "m1")
        let left = try client.get("/v1/users/bob/devices", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        #expect(Set(left.compactMap { $0["id"] as? String }) == ["ipad", "pixel", "browser"], "the failed token's device is removed")
    }

    @Test("two instances share an app's delivery: every job delivered and acked once, both deliver; metrics count attempts")
    func twoInstances() throws {
        let receiver = try Receiver { _, _ in
            usleep(5_000)
            return Response(status: 200)
        }
        defer { receiver.stop() }
        let members = (0..<40).map { "u\($0)" }
        let app = try app(members: ["alice"] + members)
        let second = try HeraldTestServer.start(try TestEnvironment.configuration())
        defer { second.shutdown() }
        _ = try webhook(app, receiver.url, concurrency: 1)
        usleep(2_500_000)   // the second instance reads which apps deliver every 2 s
        try app.ingest((0..<10).map { Events.message("e\($0)", id: "m\($0)", sender: "alice", at: past + Int64($0), text: "n\($0)") },
                       client: client)
        #expect(try eventually(seconds: 60) { try jobRows(app).allSatisfy { $0.state == "acked" } })
        let rows = try jobRows(app)
        #expect(rows.count == 400 && rows.allSatisfy { $0.attempt == 1 })
        let ids = receiver.deliveries.map(\.id)
        #expect(ids.count == 400 && Set(ids).count == 400, "each job sent once")
        let metrics = try client.get("/metrics").text
        let secondMetrics = try HTTPClient(port: second.port).get("/metrics").text
        #expect(metrics.contains("herald_delivery_attempts_total{outcome=\"delivered\",status=\"2xx\"}"))
        #expect(secondMetrics.contains("herald_delivery_attempts_total{outcome=\"delivered\",status=\"2xx\"}"), "the second instance delivered too")
        #expect(metrics.contains("herald_delivery_duration_seconds_count") && metrics.contains("herald_delivery_in_flight"))
    }
}
