import Foundation
import Glibc
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
@testable import HeraldTestSupport
import HTTPClient
import Secrets
import Testing

/// Issue 38 (SPEC §13.4), checked by implementations Herald did not write: what Herald's HTTP
/// client sends to local stand-ins for APNs (HTTP/2 over TLS, provider token verified by PyJWT),
/// FCM (the OAuth JWT bearer grant verified by PyJWT, then messages:send) and a Web Push service
/// (the body decrypted by http_ece, VAPID verified by PyJWT), all behind a test certificate
/// authority given as the CA file (scripts/push_receivers.py).
@Suite("Direct delivery protocols against independent receivers",
       .enabled(if: TestEnvironment.pushPython != nil, "needs HERALD_TEST_PYTHON: a python3 with h2, http_ece and PyJWT (make test sets it)"))
struct DirectProtocolTests {
    static func job(clear: [String]? = nil) -> JobPayload {
        JobPayload(id: 42 * 1024, attempt: 1, app: "acme", recipient: "carol", createdAt: 1, eventSource: "chat", eventID: "e1",
                   eventType: "message.created", reason: "mention", devices: [], privacy: false, badge: 3, messageID: "m42",
                   conversationID: "group_g1", receiverType: "group", groupID: "g1", sender: "alice", sentAt: 1, parentID: "m7",
                   text: "hi", lastError: nil, removal: clear.map { JobPayload.Removal(kind: .clear, collapseIds: $0) }, updates: nil,
                   excludeDevice: nil)
    }

    @Test("APNs over HTTP/2, FCM's token grant and send, and an encrypted Web Push: each accepted by its verifier")
    func receiversAccept() throws {
        let python = try #require(TestEnvironment.pushPython)
        let receivers = try PushReceivers(python: python)
        let apnsKey = receivers.apnsKey, fcmKey = receivers.fcmKey, subscription = receivers.subscription
        let apnsPort = receivers.apnsPort, httpsPort = receivers.httpsPort
        let vapidKey = try #require(PrivateKey.ec(curve: "P-256"))

        // the test CA is trusted through the CA file; the system's stay trusted; only https
        let client = HTTPClient(userAgent: "Herald", allowInternalAddresses: true, caFile: receivers.caFile, httpsOnly: true)
        let now = Int64(Date().timeIntervalSince1970)
        let providerToken = try #require(SignedToken.apns(key: apnsKey, keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: now))
        let apns = DirectRequests.APNsCredentials(topic: "com.example.chat", endpoint: "https://127.0.0.1:\(apnsPort)",
                                                  sandboxEndpoint: "https://127.0.0.1:\(apnsPort)")
        let phone = Device.Target(id: "phone", platform: .apns, token: "a1b2c3", topic: nil, sandbox: false)
        let badPhone = Device.Target(id: "old", platform: .apns, token: "bad", topic: nil, sandbox: true)
        let tokenURI = "https://127.0.0.1:\(httpsPort)/token"
        let assertion = try #require(SignedToken.fcmAssertion(key: fcmKey, clientEmail: "push@example.iam.gserviceaccount.com",
                                                              tokenURI: tokenURI, issuedAt: now))
        let granted = client.perform([DirectRequests.fcmTokenRequest(assertion: assertion, tokenURI: tokenURI, timeoutMs: 5000)], concurrency: 1)
        let access = try #require(DirectRequests.fcmAccessToken(granted[0]), "\(granted[0])")
        #expect(access.expiresIn == 3599)
        let fcm = DirectRequests.FCMCredentials(projectID: "chat-123", endpoint: "https://127.0.0.1:\(httpsPort)")
        let browser = Device.Target(id: "browser", platform: .webpush, token: subscription, topic: nil, sandbox: false)
        let webPush = DirectRequests.WebPushCredentials(subject: "mailto:ops@example.com", key: vapidKey)

        let requests = [
            DirectRequests.apns(job: Self.job(), device: phone, credentials: apns, providerToken: providerToken, timeoutMs: 5000),
            DirectRequests.apns(job: Self.job(clear: ["m1"]), device: phone, credentials: apns, providerToken: providerToken, timeoutMs: 5000),
            DirectRequests.apns(job: Self.job(), device: badPhone, credentials: apns, providerToken: providerToken, timeoutMs: 5000),
            DirectRequests.fcm(job: Self.job(), device: Device.Target(id: "pixel", platform: .fcm, token: "fcm-1", topic: nil, sandbox: false),
                               credentials: fcm, accessToken: access.token, timeoutMs: 5000),
            DirectRequests.fcm(job: Self.job(), device: Device.Target(id: "gone", platform: .fcm, token: "gone", topic: nil, sandbox: false),
                               credentials: fcm, accessToken: access.token, timeoutMs: 5000),
            try #require(DirectRequests.webPush(job: Self.job(), device: browser, credentials: webPush, nowSeconds: now, timeoutMs: 5000)),
        ]
        let responses = client.perform(requests, concurrency: 8)
        #expect(responses.map(\.status) == [200, 200, 400, 200, 404, 201], "\(responses.map { ($0.status, $0.failure.map { "\($0)" } ?? "") })")
        #expect(DirectRequests.apnsOutcome(responses[0], nowMs: 0) == .sent)
        #expect(DirectRequests.apnsOutcome(responses[2], nowMs: 0) == .removed(reason: "BadDeviceToken"))
        #expect(DirectRequests.fcmOutcome(responses[3], nowMs: 0) == .sent)
        #expect(DirectRequests.fcmOutcome(responses[4], nowMs: 0) == .removed(reason: "UNREGISTERED"))
        #expect(DirectRequests.webPushOutcome(responses[5], nowMs: 0) == .sent)

        // what each verifier said, one line per request
        var reports: [[String: Any]] = []
        _ = eventually(seconds: 10) {
            reports = receivers.reports
            return reports.count >= 7
        }
        #expect(reports.count == 7)
        for report in reports {
            #expect(report["ok"] as? Bool == true, "\(report["service"] ?? "") refused: \(report["error"] ?? "") \(report["path"] ?? "")")
        }
        #expect(Set(reports.compactMap { $0["service"] as? String }) == ["apns", "fcm-token", "fcm", "webpush"])
        let decrypted = try #require(reports.first { $0["service"] as? String == "webpush" }?["body"] as? String)
        #expect(decrypted.contains("\"id\":\"j43008\"") && !decrypted.contains("\"devices\""), "the browser read the job: \(decrypted)")
    }
}
