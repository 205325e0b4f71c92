import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Secrets
import Testing

/// SPEC §13.1 over HTTP: the device registry, devices on claimed jobs as they are at claim time,
/// and bad-token feedback on ack.
@Suite("Devices", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DevicesTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func put(_ app: TestApp, _ uid: String, _ id: String, _ body: [String: Any]) throws -> HTTPResult {
        try client.send("PUT", "/v1/users/\(uid)/devices/\(id)", token: app.serverKey, headers: ["Content-Type": "application/json"],
                        body: Array(Events.json(body).utf8))
    }

    func devices(_ app: TestApp, _ uid: String) throws -> [[String: Any]] {
        try client.get("/v1/users/\(uid)/devices", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
    }

    @Test("register, replace, list and remove; bad bodies are 400 naming the field; unknown is 404")
    func registry() throws {
        let app = try environment.makeApp(prefix: "devices")
        let phone = try put(app, "alice", "phone", ["platform": "apns", "token": "aa11", "topic": "com.example.chat", "sandbox": true])
        #expect(phone.status == 200, "\(phone.text)")
        #expect(phone.json["id"] as? String == "phone" && phone.json["token"] as? String == "aa11" && phone.json["sandbox"] as? Bool == true)
        let created = try #require(phone.json["createdAt"] as? Int)
        #expect(try put(app, "alice", "web", ["platform": "webpush", "token": Events.webPushToken("https://push.example/x")]).status == 200)
        let replaced = try put(app, "alice", "phone", ["platform": "fcm", "token": "ff22"])
        #expect(replaced.json["platform"] as? String == "fcm" && replaced.json["topic"] is NSNull && replaced.json["sandbox"] as? Bool == false)
        #expect(replaced.json["createdAt"] as? Int == created && (replaced.json["updatedAt"] as? Int ?? 0) >= created)
        #expect(try devices(app, "alice").map { $0["id"] as? String } == ["phone", "web"])

        for (body, field) in [(["platform": "sms", "token": "x"], "platform"), (["platform": "apns"], "token"),
                              (["platform": "apns", "token": ""], "token"),
                              (["platform": "apns", "token": String(repeating: "t", count: 4097)], "token"),
                              (["platform": "apns", "token": "x", "sandbox": "yes"], "sandbox"),
                              (["platform": "apns", "token": "x", "topic": 7], "topic"),
                              (["platform": "apns", "token": "x", "colour": "red"], "colour"),
                              // SPEC §13.4: a webpush token is a PushSubscription with an https endpoint and real keys
                              (["platform": "webpush", "token": "https://push.example/x"], "token"),
                              (["platform": "webpush", "token": Events.webPushToken("http://push.example/x")], "token"),
                              (["platform": "webpush", "token": #"{"endpoint": "https://push.example/x", "keys": {"p256dh": "AAAA", "auth": "ZGVmZ2hpamtsbW5vcHFycw"}}"#], "token")]
                             as [([String: Any], String)] {
            let refused = try put(app, "alice", "bad", body)
            #expect(refused.status == 400 && refused.errorParams["field"] as? String == field, "\(body): \(refused.text)")
        }
        #expect(try devices(app, "alice").count == 2, "nothing saved")

        #expect(try client.delete("/v1/users/alice/devices/web", token: app.serverKey).status == 204)
        let again = try client.delete("/v1/users/alice/devices/web", token: app.serverKey)
        #expect(again.status == 404 && again.errorCode == "ERR_DEVICE_NOT_FOUND")
        #expect(try client.get("/v1/users/alice/devices", token: app.workerKey).status == 403)
    }

    @Test("a token registered under another user moves there; at most 100 devices, and a refused one moves nothing")
    func movesAndLimit() throws {
        let app = try environment.makeApp(prefix: "devices")
        #expect(try put(app, "alice", "phone", ["platform": "apns", "token": "shared"]).status == 200)
        #expect(try put(app, "bob", "tablet", ["platform": "apns", "token": "shared"]).status == 200)
        #expect(try devices(app, "alice").isEmpty, "the token moved to bob")
        #expect(try devices(app, "bob").map { $0["id"] as? String } == ["tablet"])
        // The same token on another platform is another device.
        #expect(try put(app, "alice", "android", ["platform": "fcm", "token": "shared"]).status == 200)
        #expect(try devices(app, "alice").count == 1 && devices(app, "bob").count == 1)

        for n in 0..<100 { #expect(try put(app, "carol", "d\(n)", ["platform": "fcm", "token": "carol-\(n)"]).status == 200) }
        let over = try put(app, "carol", "d100", ["platform": "apns", "token": "shared"])
        #expect(over.status == 409 && over.errorCode == "ERR_DEVICE_LIMIT_EXCEEDED" && over.errorParams["limit"] as? Int == 100)
        #expect(try devices(app, "bob").count == 1, "the refused registration did not take bob's token")
        #expect(try put(app, "carol", "d5", ["platform": "fcm", "token": "carol-5b"]).status == 200, "replacing one is fine at the limit")
        #expect(try devices(app, "carol").count == 100)
    }

    @Test("a claimed job carries the recipient's devices at claim time; an ack's invalidDevices removes them")
    func onJobs() throws {
        let app = try environment.makeApp(prefix: "devices")
        let past = nowMilliseconds() - 60_000
        try app.ingest([Events.member("j1", "member.joined", uid: "alice", at: past - 10), Events.member("j2", "member.joined", uid: "bob", at: past - 9),
                        Events.message("e1", id: "m1", sender: "bob", at: past)], client: client)
        // Registered after the job was made: still on it. Removed before the claim: not.
        #expect(try put(app, "alice", "phone", ["platform": "apns", "token": "tok-phone", "topic": "com.example"]).status == 200)
        #expect(try put(app, "alice", "old", ["platform": "fcm", "token": "tok-old"]).status == 200)
        #expect(try put(app, "alice", "web", ["platform": "webpush", "token": Events.webPushToken("https://push.example/web")]).status == 200)
        #expect(try client.delete("/v1/users/alice/devices/old", token: app.serverKey).status == 204)
        // PostgreSQL writes the devices' JSON and a claim passes it through: every character survives
        let odd = "tok \"quoted\" \\ back\tslash é 😀 \u{7}"
        #expect(try put(app, "alice", "xodd", ["platform": "fcm", "token": odd]).status == 200)
        // in the order they were registered, not by id
        usleep(2_000)
        #expect(try put(app, "alice", "aaa", ["platform": "fcm", "token": "tok-aaa"]).status == 200)
        let claimed = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 10}"#)
        let jobs = claimed.json["jobs"] as? [[String: Any]] ?? []
        #expect(jobs.count == 1)
        let job = try #require(jobs.first)
        let carried = job["devices"] as? [[String: Any]] ?? []
        #expect(carried.map { $0["id"] as? String } == ["phone", "web", "xodd", "aaa"])
        #expect(carried[2]["token"] as? String == odd && carried[2]["topic"] is NSNull && carried[2]["sandbox"] as? Bool == false)
        #expect(carried.first.map { Set($0.keys) } == ["id", "platform", "token", "topic", "sandbox"])
        #expect(carried.first?["topic"] as? String == "com.example")

        let ack = try client.post("/v1/jobs/ack", token: app.workerKey, json: Events.json(["jobs": [
            ["id": job["id"]!, "attempt": job["attempt"]!, "invalidDevices": ["phone", "nonexistent"]]]]))
        #expect(ack.status == 200 && ack.json["acked"] as? Int == 1, "\(ack.text)")
        #expect(try devices(app, "alice").map { $0["id"] as? String } == ["web", "xodd", "aaa"])
        let bad = try client.post("/v1/jobs/ack", token: app.workerKey, json: #"{"jobs": [{"id": "j1", "attempt": 1, "invalidDevices": [3]}]}"#)
        #expect(bad.status == 400 && bad.errorParams["field"] as? String == "jobs[0].invalidDevices[0]")

        // A user without devices still gets jobs, with an empty list.
        try app.ingest([Events.message("e2", id: "m2", sender: "alice", at: past + 1)], client: client)
        let bobs = (try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 10}"#).json["jobs"] as? [[String: Any]]) ?? []
        #expect(bobs.count == 1 && (bobs.first?["devices"] as? [Any])?.isEmpty == true)
    }

    @Test("a user token manages its own devices on /v1/me/devices")
    func mine() throws {
        let app = try environment.makeApp(prefix: "devices")
        let key = try client.post("/v1/settings/token-keys", token: app.serverKey, json: #"{"alg":"HS256"}"#)
        let secret = Array(try #require(key.json["secret"] as? String).utf8)
        let kid = try #require(key.json["kid"] as? String)
        let now = Int(Date().timeIntervalSince1970)
        let input = Base64URL.encode(Array(#"{"alg":"HS256","kid":"\#(kid)"}"#.utf8)) + "."
            + Base64URL.encode(Array(#"{"sub":"dana","app":"\#(app.id)","exp":\#(now + 600)}"#.utf8))
        let token = input + "." + Base64URL.encode(Secrets.hmacSHA256(key: secret, message: Array(input.utf8)))
        let put = try client.send("PUT", "/v1/me/devices/laptop", token: token, headers: ["Content-Type": "application/json"],
                                  body: Array(Events.json(["platform": "webpush", "token": Events.webPushToken("https://push.example/dana")]).utf8))
        #expect(put.status == 200, "\(put.text)")
        #expect(try devices(app, "dana").map { $0["id"] as? String } == ["laptop"])
        #expect(try client.send("DELETE", "/v1/me/devices/laptop", token: token).status == 204)
        #expect(try devices(app, "dana").isEmpty)
    }
}
