import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import HTTPClient
import Secrets
import Testing

/// What built-in delivery sends and what each answer means (SPEC §13.3), without a network.
@Suite("Delivery requests")
struct DeliveryRequestTests {
    static func job(devices: [Device.Target] = [], clear: [String]? = nil) -> JobPayload {
        JobPayload(id: 42, attempt: 1, app: "acme", recipient: "carol", createdAt: 1, eventSource: "chat", eventID: "e1",
                   eventType: "message.created", reason: "mention", devices: devices, privacy: false, badge: 3, messageID: "m42",
                   conversationID: "group_g1", receiverType: "group", groupID: "g1", sender: "alice", sentAt: 1, parentID: "m7",
                   text: "hi", lastError: nil, removal: clear.map { JobPayload.Removal(kind: .clear, collapseIds: $0) }, updates: nil,
                   excludeDevice: nil)
    }

    static func response(_ status: Int, retryAfter: String? = nil, body: String = "", failure: OutboundResponse.Failure? = nil) -> OutboundResponse {
        OutboundResponse(status: status, retryAfter: retryAfter, body: Array(body.utf8), failure: failure, seconds: 0.01)
    }

    @Test("2xx delivers; 408, 429 and 5xx retry (with Retry-After); other statuses are dead; no answer retries")
    func outcomes() {
        let job = Self.job()
        func outcome(_ response: OutboundResponse) -> DeliveryRequest.Outcome {
            DeliveryRequest.outcome(of: response, mode: .webhook, job: job, nowMs: 1_000_000)
        }
        for status in [200, 201, 202, 204, 299] { #expect(outcome(Self.response(status)) == .delivered(invalidDevices: [])) }
        for status in [408, 429, 500, 502, 503, 599] { #expect(outcome(Self.response(status)) == .retry(afterMs: nil, error: "HTTP \(status)")) }
        #expect(outcome(Self.response(429, retryAfter: "7")) == .retry(afterMs: 7000, error: "HTTP 429"))
        #expect(outcome(Self.response(503, retryAfter: "999999")) == .retry(afterMs: 86_400_000, error: "HTTP 503"), "at most a day")
        for status in [100, 301, 304, 400, 401, 404, 410, 413, 422] { #expect(outcome(Self.response(status)) == .dead(error: "HTTP \(status)")) }
        #expect(outcome(Self.response(0, failure: .timeout)) == .retry(afterMs: nil, error: "no answer within the timeout"))
        #expect(outcome(Self.response(0, failure: .connect("refused"))) == .retry(afterMs: nil, error: "connection failed: refused"))
        #expect(outcome(Self.response(0, failure: .notSent)) == .notSent)
        guard case .dead(let refused) = outcome(Self.response(0, failure: .refusedAddress)) else {
            Issue.record("an internal address must be a permanent failure")
            return
        }
        #expect(refused.contains("HERALD_DELIVERY_ALLOW_PRIVATE") && !refused.contains("127."), "\(refused)")
        #expect(outcome(Self.response(200, body: #"{"invalidDevices": ["a", 7, "b/c", "d"]}"#)) == .delivered(invalidDevices: ["a", "d"]))
        #expect(outcome(Self.response(200, body: "not json")) == .delivered(invalidDevices: []))
        #expect(DeliveryRequest.statusClass(Self.response(503)) == "5xx" && DeliveryRequest.statusClass(Self.response(0, failure: .timeout)) == "timeout")
    }

    @Test("Retry-After as delay-seconds or an HTTP-date")
    func retryAfter() {
        let now = DeliveryRequest.httpDateMs("Sun, 06 Nov 1994 08:49:37 GMT")!
        #expect(now == 784_111_777_000)
        #expect(DeliveryRequest.retryAfterMs("Sun, 06 Nov 1994 08:50:37 GMT", nowMs: now) == 60_000)
        #expect(DeliveryRequest.retryAfterMs("Sun, 06 Nov 1994 08:00:00 GMT", nowMs: now) == 0, "a date in the past: now")
        #expect(DeliveryRequest.retryAfterMs("120", nowMs: now) == 120_000)
        for bad in ["", "-1", "soon", "Sun, 06 Nov 1994 25:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT"] {
            #expect(DeliveryRequest.retryAfterMs(bad, nowMs: now) == nil, "\(bad)")
        }
    }

    @Test("webhook: the job's JSON signed per Standard Webhooks, one signature per live secret")
    func webhook() throws {
        let secret = try #require(WebhookSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        var settings = DeliverySettings()
        settings.mode = .webhook
        settings.url = "https://example.com/hook"
        var request = try #require(DeliveryRequest.make(job: Self.job(), settings: settings))
        #expect(request.headers == ["webhook-id: j42"], "signed when sent, not when built")
        DeliveryRequest.sign(&request, jobID: 42, secrets: [secret, secret], nowSeconds: 1_674_087_231)
        #expect(request.url == "https://example.com/hook" && request.timeoutMs == 5000)
        #expect(request.headers.contains("webhook-id: j42") && request.headers.contains("webhook-timestamp: 1674087231"))
        let signature = secret.signature(id: "j42", timestamp: 1_674_087_231, body: request.body)
        #expect(request.headers.contains("webhook-signature: \(signature) \(signature)"))
        // The example of Standard Webhooks' (and Svix's) documentation.
        let example = secret.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(example == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["id"] as? String == "j42" && body["kind"] as? String == "reply")
    }

    @Test("gorush: a notification per platform (APNs per topic and environment); clear jobs are silent; no device, nothing to send")
    func gorush() throws {
        var settings = DeliverySettings()
        settings.mode = .gorush
        settings.url = "http://gorush:8088/api/push"
        let devices = [Device.Target(id: "a", platform: .apns, token: "t1", topic: "com.x", sandbox: false),
                       Device.Target(id: "b", platform: .apns, token: "t2", topic: "com.x", sandbox: true),
                       Device.Target(id: "c", platform: .fcm, token: "t3", topic: nil, sandbox: false),
                       Device.Target(id: "d", platform: .webpush, token: "https://push", topic: nil, sandbox: false)]
        let request = try #require(DeliveryRequest.make(job: Self.job(devices: devices), settings: settings))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        let notifications = try #require(body["notifications"] as? [[String: Any]])
        #expect(notifications.map { $0["tokens"] as? [String] ?? [] } == [["t1"], ["t2"], ["t3"]])
        #expect(notifications.map { $0["platform"] as? Int } == [1, 1, 2])
        #expect(notifications[1]["development"] as? Bool == true && notifications[0]["development"] == nil)
        #expect(notifications[0]["message"] as? String == "alice mentioned you: hi" && notifications[0]["badge"] as? Int == 3)
        // what gorush reads (appleboy/gorush notify/): iOS alerts with a sound; FCM v1's collapse key,
        // tag, sound and count under `android`; FCM data values are strings, nulls left out
        #expect(notifications[0]["sound"] as? String == "default")
        let fcm = notifications[2]
        #expect(fcm["collapse_key"] == nil)
        let android = try #require(fcm["android"] as? [String: Any])
        let collapse = try #require(notifications[0]["collapse_id"] as? String)
        #expect(android["collapse_key"] as? String == collapse)
        let androidNotification = try #require(android["notification"] as? [String: Any])
        #expect(androidNotification["tag"] as? String == collapse && androidNotification["sound"] as? String == "default"
                && androidNotification["notification_count"] as? Int == 3)
        let fcmData = try #require(fcm["data"] as? [String: Any])
        #expect(fcmData.values.allSatisfy { $0 is String } && !fcmData.values.contains { ($0 as? String)?.contains("%!") ?? false })
        #expect(fcmData["parentMessageId"] as? String == "m7")
        var topLevel = Self.job(devices: [devices[2]])
        topLevel.parentID = nil
        let top = try #require(DeliveryRequest.make(job: topLevel, settings: settings))
        let topData = try #require(((try JSONSerialization.jsonObject(with: Data(top.body)) as? [String: Any])?["notifications"] as? [[String: Any]])?.first?["data"] as? [String: Any])
        #expect(topData["parentMessageId"] == nil && topData["messageId"] as? String == "m42", "a null is left out, not sent as text: \(topData)")
        var signed = request
        DeliveryRequest.sign(&signed, jobID: 42, secrets: [], nowSeconds: 1)
        #expect(!signed.headers.contains { $0.hasPrefix("webhook-signature") }, "no secret, no signature")

        let clear = try #require(DeliveryRequest.make(job: Self.job(devices: devices, clear: ["m1", "m2"]), settings: settings))
        let silent = try #require((try JSONSerialization.jsonObject(with: Data(clear.body)) as? [String: Any])?["notifications"] as? [[String: Any]])
        #expect(silent.allSatisfy { $0["content_available"] as? Bool == true && $0["message"] == nil })
        #expect((silent[0]["data"] as? [String: Any])?["collapseIds"] as? [String] == ["m1", "m2"])
        // FCM's data values are strings: the array as its JSON text
        #expect((silent[2]["data"] as? [String: Any])?["collapseIds"] as? String == #"["m1","m2"]"#)
        #expect((silent[2]["data"] as? [String: Any])?.values.allSatisfy { $0 is String } == true)

        #expect(DeliveryRequest.make(job: Self.job(devices: [devices[3]]), settings: settings) == nil)
        let failed = Array(#"""
            {"counts": 3, "logs": [{"type": "failed-push", "token": "t2", "error": "Unregistered"},
                                   {"type": "failed-push", "token": "t3", "error": "Post https://fcm.googleapis.com: 503 Service Unavailable"},
                                   {"type": "failed-push", "token": "t1"}, {"type": "succeeded-push", "token": "t1"}], "success": "ok"}
            """#.utf8)
        #expect(DeliveryRequest.gorushFailedDevices(failed, job: Self.job(devices: devices)) == ["b"],
                "only a bad token removes its device: not an outage, not an unexplained failure")
    }

    @Test("the job's event trace: a traceparent header on what is sent, and in the data of webhook and gorush bodies")
    func trace() throws {
        let trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        var job = Self.job(devices: [Device.Target(id: "c", platform: .fcm, token: "t3", topic: nil, sandbox: false)])
        var settings = DeliverySettings()
        settings.url = "https://example.com/hook"
        for mode in [DeliverySettings.Mode.webhook, .gorush] {
            settings.mode = mode
            let plain = try #require(DeliveryRequest.make(job: job, settings: settings))
            #expect(!plain.headers.contains { $0.hasPrefix("traceparent") } && !String(decoding: plain.body, as: UTF8.self).contains("traceparent"),
                    "no trace, nothing added")
        }
        job.traceparent = trace
        settings.mode = .webhook
        let webhook = try #require(DeliveryRequest.make(job: job, settings: settings))
        #expect(webhook.headers.contains("traceparent: \(trace)"))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(webhook.body)) as? [String: Any])
        #expect((body["data"] as? [String: Any])?["traceparent"] as? String == trace)
        settings.mode = .gorush
        let gorush = try #require(DeliveryRequest.make(job: job, settings: settings))
        #expect(gorush.headers.contains("traceparent: \(trace)"))
        let notifications = try #require((try JSONSerialization.jsonObject(with: Data(gorush.body)) as? [String: Any])?["notifications"] as? [[String: Any]])
        #expect(notifications.map { ($0["data"] as? [String: Any])?["traceparent"] as? String } == [trace])
    }
}
