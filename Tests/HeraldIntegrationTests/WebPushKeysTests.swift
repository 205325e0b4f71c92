import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
@testable import HeraldTestSupport
import Secrets
import Testing

/// SPEC §13.4: the app's VAPID key pair, made once and kept; only its public key is shown.
@Suite("Web Push keys", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct WebPushKeysTests {
    @Test("GET is 404 until POST makes the key pair; POST again keeps it; the public key is a P-256 point; workers may not")
    func keys() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let app = try environment.makeApp(prefix: "vapid")
        let path = "/v1/settings/delivery/webpush-keys"
        let none = try client.get(path, token: app.serverKey)
        #expect(none.status == 404 && (none.json["error"] as? [String: Any])?["code"] as? String == "ERR_NOT_FOUND")
        let made = try client.post(path, token: app.serverKey, json: "{}")
        #expect(made.status == 201, "\(made.text)")
        let key = try #require(made.json["publicKey"] as? String)
        let point = try #require(Base64URL.decode(Array(key.utf8)))
        #expect(point.count == 65 && PublicKey.p256(point: point) != nil, "an uncompressed P-256 point: \(key)")
        let again = try client.post(path, token: app.serverKey, json: "{}")
        #expect(again.status == 200 && again.json["publicKey"] as? String == key, "kept: subscriptions depend on it")
        #expect(try client.get(path, token: app.serverKey).json["publicKey"] as? String == key)
        #expect(!made.text.contains("PRIVATE") && made.json.count == 1, "only the public key leaves Herald")
        let other = try environment.makeApp(prefix: "vapid")
        #expect(try client.post(path, token: other.serverKey, json: "{}").json["publicKey"] as? String != key)
        #expect(try client.post(path, token: app.workerKey, json: "{}").status == 403)
    }
}
