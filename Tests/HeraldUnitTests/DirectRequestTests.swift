import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import HTTPClient
import JSON
import Secrets
import Testing

/// SPEC §13.4: what direct delivery sends to APNs, FCM and a push service for one device, and what
/// their answers mean — without I/O.
@Suite("Direct delivery requests")
struct DirectRequestTests {
    static func job(clear: [String]? = nil, text: String = "hi") -> JobPayload {
        var job = DeliveryRequestTests.job(devices: [], clear: clear)
        job.text = text
        return job
    }

    static func object(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    static func response(_ status: Int, _ body: String = "", retryAfter: String? = nil) -> OutboundResponse {
        OutboundResponse(status: status, retryAfter: retryAfter, body: Array(body.utf8), failure: nil, seconds: 0.01)
    }

    static let apnsCredentials = DirectRequests.APNsCredentials(topic: "com.example.chat", endpoint: "https://api.push.apple.com",
                                                                sandboxEndpoint: "https://api.sandbox.push.apple.com")

    @Test("APNs: HTTP/2 to the device's endpoint, provider token, topic, alert with sound and thread, the job as `herald`")
    func apns() throws {
        let device = Device.Target(id: "phone", platform: .apns, token: "a1b2", topic: nil, sandbox: false)
        let request = DirectRequests.apns(job: Self.job(), device: device, credentials: Self.apnsCredentials, providerToken: "TOKEN",
                                          timeoutMs: 5000)
        #expect(request.url == "https://api.push.apple.com/3/device/a1b2" && request.http2)
        #expect(request.headers.contains("authorization: bearer TOKEN") && request.headers.contains("apns-topic: com.example.chat"))
        #expect(request.headers.contains("apns-push-type: alert") && request.headers.contains("apns-priority: 10"))
        #expect(request.headers.contains("apns-collapse-id: m42"))
        let body = try Self.object(request.body)
        let aps = try #require(body["aps"] as? [String: Any])
        #expect((aps["alert"] as? [String: Any])?["body"] as? String == "alice mentioned you: hi")
        #expect(aps["sound"] as? String == "default" && aps["badge"] as? Int == 3 && aps["thread-id"] as? String == "m7")
        let herald = try #require(body["herald"] as? [String: Any])
        #expect(herald["id"] as? String == "j42" && herald["notification"] == nil && herald["devices"] == nil && herald["data"] != nil)

        // sandbox devices, their own topic; a silent job is a background push
        let sandbox = Device.Target(id: "dev", platform: .apns, token: "c3", topic: "com.example.beta", sandbox: true)
        let silent = DirectRequests.apns(job: Self.job(clear: ["m1"]), device: sandbox, credentials: Self.apnsCredentials,
                                         providerToken: "TOKEN", timeoutMs: 5000)
        #expect(silent.url == "https://api.sandbox.push.apple.com/3/device/c3" && silent.headers.contains("apns-topic: com.example.beta"))
        #expect(silent.headers.contains("apns-push-type: background") && silent.headers.contains("apns-priority: 5"))
        #expect((try Self.object(silent.body)["aps"] as? [String: Any])?["content-available"] as? Int == 1)

        // at most 4 KB: the body text is cut, the JSON stays whole
        let long = DirectRequests.apns(job: Self.job(text: String(repeating: "é", count: 5000)), device: device,
                                       credentials: Self.apnsCredentials, providerToken: "TOKEN", timeoutMs: 5000)
        #expect(long.body.count <= 4096)
        let cut = ((try Self.object(long.body)["aps"] as? [String: Any])?["alert"] as? [String: Any])?["body"] as? String
        #expect(cut?.hasSuffix("…") == true)
    }

    @Test("APNs answers: 200 sent; 410 and bad-token 400s remove; ExpiredProviderToken renews; 429 and 5xx retry")
    func apnsOutcomes() {
        #expect(DirectRequests.apnsOutcome(Self.response(200), nowMs: 0) == .sent)
        #expect(DirectRequests.apnsOutcome(Self.response(410, #"{"reason":"Unregistered","timestamp":1}"#), nowMs: 0) == .removed(reason: "Unregistered"))
        for reason in ["BadDeviceToken", "DeviceTokenNotForTopic", "Unregistered"] {
            #expect(DirectRequests.apnsOutcome(Self.response(400, #"{"reason":"\#(reason)"}"#), nowMs: 0) == .removed(reason: reason))
        }
        #expect(DirectRequests.apnsOutcome(Self.response(400, #"{"reason":"PayloadTooLarge"}"#), nowMs: 0) == .failed(error: "APNs 400 PayloadTooLarge"))
        #expect(DirectRequests.apnsOutcome(Self.response(403, #"{"reason":"ExpiredProviderToken"}"#), nowMs: 0) == .renewCredentials)
        #expect(DirectRequests.apnsOutcome(Self.response(429, #"{"reason":"TooManyRequests"}"#, retryAfter: "7"), nowMs: 0)
                == .retry(afterMs: 7000, error: "APNs 429 TooManyRequests"))
        #expect(DirectRequests.apnsOutcome(OutboundResponse(status: 0, retryAfter: nil, body: [], failure: .refusedAddress, seconds: 0), nowMs: 0)
                == .removed(reason: "refused"))
    }

    @Test("FCM: messages:send with the access token; data values all strings; android collapse key, tag and count; silent jobs data only")
    func fcm() throws {
        let credentials = DirectRequests.FCMCredentials(projectID: "chat-123", endpoint: "https://fcm.googleapis.com")
        let device = Device.Target(id: "pixel", platform: .fcm, token: "fcm-token", topic: nil, sandbox: false)
        let request = DirectRequests.fcm(job: Self.job(), device: device, credentials: credentials, accessToken: "ya29", timeoutMs: 5000)
        #expect(request.url == "https://fcm.googleapis.com/v1/projects/chat-123/messages:send" && request.headers.contains("authorization: Bearer ya29"))
        let message = try #require(try Self.object(request.body)["message"] as? [String: Any])
        #expect(message["token"] as? String == "fcm-token")
        #expect((message["notification"] as? [String: Any])?["body"] as? String == "alice mentioned you: hi")
        let data = try #require(message["data"] as? [String: Any])
        #expect(data.values.allSatisfy { $0 is String } && data["jobId"] as? String == "j42" && data["kind"] as? String == "reply")
        #expect(data["sentAt"] as? String == "1" && data["messageId"] as? String == "m42")
        let android = try #require(message["android"] as? [String: Any])
        #expect(android["collapse_key"] as? String == "m42")
        #expect((android["notification"] as? [String: Any])?["tag"] as? String == "m42"
                && (android["notification"] as? [String: Any])?["notification_count"] as? Int == 3)
        let apns = try #require(message["apns"] as? [String: Any])
        #expect((apns["headers"] as? [String: Any])?["apns-collapse-id"] as? String == "m42")

        let silent = try #require(try Self.object(DirectRequests.fcm(job: Self.job(clear: ["m1"]), device: device, credentials: credentials,
                                                                     accessToken: "ya29", timeoutMs: 5000).body)["message"] as? [String: Any])
        #expect(silent["notification"] == nil && silent["android"] == nil)
        #expect((silent["data"] as? [String: Any])?["collapseIds"] as? String == #"["m1"]"#)
    }

    @Test("FCM answers: 404, UNREGISTERED and a token INVALID_ARGUMENT remove; 401 renews; 429 and 5xx retry with Retry-After")
    func fcmOutcomes() {
        func error(_ status: String, _ code: String?, _ message: String) -> String {
            let details = code.map { #", "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": "\#($0)"}]"# } ?? ""
            return #"{"error": {"code": 400, "message": "\#(message)", "status": "\#(status)"\#(details)}}"#
        }
        #expect(DirectRequests.fcmOutcome(Self.response(200, #"{"name": "projects/p/messages/1"}"#), nowMs: 0) == .sent)
        #expect(DirectRequests.fcmOutcome(Self.response(404, error("NOT_FOUND", "UNREGISTERED", "Requested entity was not found.")), nowMs: 0)
                == .removed(reason: "UNREGISTERED"))
        #expect(DirectRequests.fcmOutcome(Self.response(400, error("INVALID_ARGUMENT", "INVALID_ARGUMENT",
                                                                   "The registration token is not a valid FCM registration token")), nowMs: 0)
                == .removed(reason: "INVALID_ARGUMENT"))
        #expect(DirectRequests.fcmOutcome(Self.response(400, error("INVALID_ARGUMENT", "INVALID_ARGUMENT", "Invalid JSON payload received.")), nowMs: 0)
                == .failed(error: "FCM 400 INVALID_ARGUMENT"))
        #expect(DirectRequests.fcmOutcome(Self.response(401), nowMs: 0) == .renewCredentials)
        #expect(DirectRequests.fcmOutcome(Self.response(503, "", retryAfter: "30"), nowMs: 0) == .retry(afterMs: 30_000, error: "FCM 503 "))
    }

    @Test("Web Push: the subscription token parsed, the job encrypted for it, VAPID for the endpoint's origin, TTL, urgency and topic")
    func webPush() throws {
        let browser = try #require(PrivateKey.ec(curve: "P-256"))
        let point = try #require(browser.p256PublicPoint)
        let auth = Secrets.randomBytes(16)
        let token = #"{"endpoint": "https://push.example.net:8443/wpush/v2/abc?x=1", "keys": {"p256dh": "\#(Base64URL.encode(point))", "auth": "\#(Base64URL.encode(auth))"}}"#
        let parsed = try #require(DirectRequests.subscription(token: token))
        #expect(parsed.endpoint == "https://push.example.net:8443/wpush/v2/abc?x=1" && parsed.keys.authSecret == auth)
        #expect(DirectRequests.origin(of: parsed.endpoint) == "https://push.example.net:8443")
        for bad in ["https://push.example.net", #"{"endpoint": "http://push.example.net/x", "keys": {"p256dh": "\#(Base64URL.encode(point))", "auth": "\#(Base64URL.encode(auth))"}}"#,
                    #"{"endpoint": "https://push.example.net/x", "keys": {"p256dh": "AAAA", "auth": "\#(Base64URL.encode(auth))"}}"#,
                    #"{"endpoint": "https://push.example.net/x", "keys": {"p256dh": "\#(Base64URL.encode(point))", "auth": "AAAA"}}"#] {
            #expect(DirectRequests.subscription(token: bad) == nil, "\(bad)")
        }

        let vapid = try #require(PrivateKey.ec(curve: "P-256"))
        let device = Device.Target(id: "browser", platform: .webpush, token: token, topic: nil, sandbox: false)
        let request = try #require(DirectRequests.webPush(job: Self.job(), device: device,
                                                          credentials: .init(subject: "mailto:ops@example.com", key: vapid),
                                                          nowSeconds: 1_700_000_000, timeoutMs: 5000))
        #expect(request.url == parsed.endpoint && request.contentType == "application/octet-stream" && request.http2,
                "push services are asked for HTTP/2 (ALPN falls back), as APNs")
        for header in ["Content-Encoding: aes128gcm", "TTL: 86400", "Urgency: high", "Topic: " + Base64URL.encode(Array("m42".utf8))] {
            #expect(request.headers.contains(header), "\(header) in \(request.headers)")
        }
        let authorization = try #require(request.headers.first { $0.hasPrefix("Authorization: vapid t=") })
        #expect(authorization.hasSuffix("k=" + Base64URL.encode(try #require(vapid.p256PublicPoint))))

        // the browser decrypts the job, without its devices
        let plain = try #require(PushProtocolTests.open(request.body, receiver: browser, authSecret: auth))
        let job = try Self.object(Array(plain.dropLast()))
        #expect(job["id"] as? String == "j42" && job["devices"] == nil && job["notification"] != nil)

        #expect(DirectRequests.webPushOutcome(Self.response(201), nowMs: 0) == .sent)
        #expect(DirectRequests.webPushOutcome(Self.response(410), nowMs: 0) == .removed(reason: "HTTP 410"))
        #expect(DirectRequests.webPushOutcome(Self.response(404), nowMs: 0) == .removed(reason: "HTTP 404"))
        #expect(DirectRequests.webPushOutcome(Self.response(429, retryAfter: "5"), nowMs: 0) == .retry(afterMs: 5000, error: "push service 429"))
        #expect(DirectRequests.webPushOutcome(Self.response(413), nowMs: 0) == .failed(error: "push service 413"))
    }

    @Test("webhook devices: 2xx sent, 410 removed, 408/429/5xx retried, other 4xx failed for good, internal address refused")
    func webhookDevices() {
        #expect(DirectRequests.webhookDeviceOutcome(Self.response(204), nowMs: 0) == .sent)
        #expect(DirectRequests.webhookDeviceOutcome(Self.response(410), nowMs: 0) == .removed(reason: "HTTP 410"))
        #expect(DirectRequests.webhookDeviceOutcome(Self.response(503, retryAfter: "7"), nowMs: 0) == .retry(afterMs: 7000, error: "webhook 503"))
        #expect(DirectRequests.webhookDeviceOutcome(Self.response(408), nowMs: 0) == .retry(afterMs: nil, error: "webhook 408"))
        #expect(DirectRequests.webhookDeviceOutcome(Self.response(400), nowMs: 0) == .failed(error: "webhook 400"))
        let refused = OutboundResponse(status: 0, retryAfter: nil, body: [], failure: .refusedAddress, seconds: 0)
        #expect(DirectRequests.webhookDeviceOutcome(refused, nowMs: 0) == .removed(reason: "refused"))
    }

    @Test("a job's outcome from its devices': acked when each is final, else retried for the rest, removed devices named either way")
    func jobOutcome() {
        typealias Outcome = DirectRequests.DeviceOutcome
        #expect(DirectSender.jobOutcome([]) == .delivered(invalidDevices: []), "no device: acked at once")
        #expect(DirectSender.jobOutcome([("a", .sent), ("b", .removed(reason: "BadDeviceToken")), ("c", .failed(error: "no credentials"))])
                == .delivered(invalidDevices: ["b"]))
        #expect(DirectSender.jobOutcome([("a", .sent), ("b", .removed(reason: "x")), ("c", .retry(afterMs: nil, error: "APNs 503"))])
                == .retry(afterMs: nil, error: "APNs 503", done: ["a", "b"], invalidDevices: ["b"]))
        #expect(DirectSender.jobOutcome([("a", .retry(afterMs: 2000, error: "429")), ("b", .retry(afterMs: 5000, error: "429"))])
                == .retry(afterMs: 5000, error: "429", done: [], invalidDevices: []), "the longest Retry-After")
        #expect(DirectSender.jobOutcome([("a", DirectSender.unsent), ("b", DirectSender.unsent)]) == .notSent,
                "delivery stopped before any request: the job goes back as it was")
        #expect(DirectSender.jobOutcome([("a", .sent), ("b", DirectSender.unsent)])
                == .retry(afterMs: 0, error: "not sent", done: ["a"], invalidDevices: []), "stopped halfway: the rest later")
    }
}
