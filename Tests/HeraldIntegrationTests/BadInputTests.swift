import Foundation
@testable import HeraldTestSupport
import Testing

@Suite("Bad input", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct BadInputTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let admin = TestEnvironment.adminToken

    init() throws {
        environment = try TestEnvironment.shared()
    }

    @Test("a body that is not JSON is 400 ERR_BAD_REQUEST and creates nothing")
    func malformedJSON() throws {
        let id = "bad-\(UUID().uuidString.prefix(8))"
        let response = try client.post("/v1/apps", token: admin, json: #"{"id": "\#(id)""#)
        #expect(response.status == 400)
        #expect(response.errorCode == "ERR_BAD_REQUEST")
        #expect(response.json["error"] != nil)
        let list = try client.get("/v1/apps?limit=1000", token: admin)
        #expect(!list.text.contains(id))
    }

    @Test("a wrong type, a missing field and an invalid value name the field's path", arguments: [
        (#"{"id": 5}"#, "id"), (#"{}"#, "id"), (#"{"id": ""}"#, "id"), (#"{"id": "a/b"}"#, "id"), (#"[1]"#, nil),
    ])
    func fieldPath(body: String, field: String?) throws {
        let response = try client.post("/v1/apps", token: admin, json: body)
        #expect(response.status == 400)
        #expect(response.errorCode == "ERR_BAD_REQUEST")
        #expect(response.errorParams["field"] as? String == field)
    }

    @Test("an invalid role names the field")
    func invalidRole() throws {
        let app = try environment.makeApp()
        let response = try client.post("/v1/apps/\(app.id)/keys", token: admin, json: #"{"role": "boss"}"#)
        #expect(response.status == 400)
        #expect(response.errorParams["field"] as? String == "role")
    }

    @Test("a body over the limit is 413, after authentication")
    func oversize() throws {
        let big = [UInt8](repeating: UInt8(ascii: " "), count: 4 * 1024 * 1024 + 10)
        let response = try client.send("POST", "/v1/apps", token: admin, headers: ["Content-Type": "application/json"], body: big)
        #expect(response.status == 413)
        #expect(response.errorCode == "ERR_PAYLOAD_TOO_LARGE")
        // The token is checked first: without one, the same body is a 401.
        let anonymous = try client.send("POST", "/v1/apps", headers: ["Content-Type": "application/json"], body: big)
        #expect(anonymous.status == 401)
        // The server is still fine afterwards.
        #expect(try client.get("/healthz").status == 200)
    }

    @Test("an unsupported content type is 415", arguments: ["text/plain", "application/xml", "application/jsonx"])
    func unsupportedMediaType(type: String) throws {
        let response = try client.post("/v1/apps", token: admin, json: #"{"id":"x"}"#, headers: ["Content-Type": type])
        #expect(response.status == 415)
        #expect(response.errorCode == "ERR_UNSUPPORTED_MEDIA_TYPE")
    }

    @Test("application/json with parameters is accepted")
    func mediaTypeParameters() throws {
        let id = "charset-\(UUID().uuidString.prefix(8).lowercased())"
        let response = try client.post("/v1/apps", token: admin, json: #"{"id":"\#(id)"}"#,
                                       headers: ["Content-Type": "Application/JSON; charset=utf-8"])
        #expect(response.status == 201)
    }

    @Test("a key label is at most 200 Unicode scalars, as the document's maxLength counts, not 200 Characters")
    func labelLength() throws {
        let app = try environment.makeApp()
        func create(_ label: String) throws -> HTTPResult {
            try client.post("/v1/apps/\(app.id)/keys", token: admin, json: Events.json(["role": "server", "label": label]))
        }
        #expect(try create(String(repeating: "e", count: 200)).status == 201)
        let combining = String(repeating: "e\u{301}", count: 150)  // 150 Characters, 300 scalars
        let refused = try create(combining)
        #expect(refused.status == 400)
        #expect(refused.errorParams["field"] as? String == "label")
    }

    @Test("U+0000 that PostgreSQL could not hold is a 400, never a 500: a key label, a forged cursor")
    func nulInTextParameters() throws {
        let app = try environment.makeApp()
        let label = try client.post("/v1/apps/\(app.id)/keys", token: admin, json: #"{"role": "server", "label": "a\u0000b"}"#)
        #expect(label.status == 400)
        #expect(label.errorParams["field"] as? String == "label")
        func forged(_ text: String) -> String {
            Data(text.utf8).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
        }
        for (path, token) in [("/v1/apps?cursor=" + forged("apps\u{1F}a\u{0}"), admin),
                              ("/v1/groups/g1/members?cursor=" + forged("members\u{1F}\u{0}"), app.serverKey)] {
            let response = try client.get(path, token: token)
            #expect(response.status == 400, "\(path): \(response.text)")
            #expect(response.errorParams["field"] as? String == "cursor")
        }
    }

    @Test("U+0000 anywhere in a JSON body is 400 ERR_BAD_REQUEST naming its path, on every route with a body, never a 500")
    func nulInEveryBody() throws {
        let app = try environment.makeApp()
        let server = app.serverKey, worker = app.workerKey
        // (method, path, token, body, the field named); `\u0000` is the JSON escape, sent as written.
        let cases: [(String, String, String, String, String)] = [
            ("POST", "/v1/apps", admin, #"{"id": "a\u0000"}"#, "id"),
            ("POST", "/v1/apps/\(app.id)/keys", admin, #"{"role": "server", "label": "a\u0000b"}"#, "label"),
            ("POST", "/v1/users/u1/subscriptions/lookup", server, #"{"messageIds": ["m1", "m\u0000"]}"#, "messageIds[1]"),
            ("POST", "/v1/users/u1/messages/lookup", server, #"{"messageIds": ["m\u0000"]}"#, "messageIds[0]"),
            ("PUT", "/v1/groups/g1/members", server, #"{"members": ["u\u0000"]}"#, "members[0]"),
            ("POST", "/v1/users/u1/threads/m1/read", server, #"{"messageId": "m\u0000"}"#, "messageId"),
            ("POST", "/v1/users/u1/threads/read", server, #"{"deviceId": "d\u0000"}"#, "deviceId"),
            ("PATCH", "/v1/settings/notifications", server, #"{"timezone": "Europe/Paris\u0000"}"#, "timezone"),
            ("PATCH", "/v1/settings/notifications", server, #"{"corsOrigins": ["https://a.example\u0000"]}"#, "corsOrigins[0]"),
            ("PATCH", "/v1/settings/notifications", server,
             #"{"delivery": {"mode": "webhook", "url": "https://hooks.example/\u0000"}}"#, "delivery.url"),
            ("PATCH", "/v1/settings/notifications", server, #"{"privacyTemplateMode": "\u0000"}"#, "privacyTemplateMode"),
            ("PATCH", "/v1/users/u1/preferences", server, #"{"timezone": "\u0000"}"#, "timezone"),
            ("PATCH", "/v1/users/u1/preferences", server, #"{"groupPreferences": {"messages": "\u0000"}}"#, "groupPreferences.messages"),
            ("POST", "/v1/settings/token-keys", server, #"{"alg": "RS256", "publicKey": "-----BEGIN PUBLIC KEY-----\u0000"}"#, "publicKey"),
            ("POST", "/v1/settings/token-keys", server, #"{"alg": "HS256\u0000"}"#, "alg"),
            ("PUT", "/v1/users/u1/devices/d1", server, #"{"platform": "fcm", "token": "t\u0000"}"#, "token"),
            ("PUT", "/v1/users/u1/devices/d1", server, #"{"platform": "apns", "token": "t", "topic": "\u0000"}"#, "topic"),
            ("PUT", "/v1/users/u1/mutes", server,
             #"{"conversations": [{"id": "g\u0000", "type": "group", "until": 99999999999999}]}"#, "conversations[0].id"),
            ("DELETE", "/v1/users/u1/mutes", server, #"{"conversations": [{"id": "g1", "type": "group\u0000"}]}"#, "conversations[0].type"),
            ("POST", "/v1/jobs/fail", worker, #"{"jobs": [{"id": "j1", "attempt": 1, "error": "boom\u0000"}]}"#, "jobs[0].error"),
            ("POST", "/v1/jobs/ack", worker, #"{"jobs": [{"id": "j1", "attempt": 1, "invalidDevices": ["d\u0000"]}]}"#,
             "jobs[0].invalidDevices[0]"),
            ("POST", "/v1/jobs/dead/requeue", server, #"{"ids": ["j1\u0000"]}"#, "ids[0]"),
            ("POST", "/v1/jobs/claim", worker, #"{"max": 1, "x\u0000": 1}"#, "x\u{0}"),
        ]
        for (method, path, token, body, field) in cases {
            let response = try client.send(method, path, token: token, headers: ["Content-Type": "application/json"],
                                           body: Array(body.utf8))
            #expect(response.status == 400 && response.errorCode == "ERR_BAD_REQUEST", "\(method) \(path) \(body): \(response.status) \(response.text)")
            #expect(response.errorParams["field"] as? String == field, "\(method) \(path) \(body): \(response.text)")
        }
    }

    @Test("a whole number written 3.0 is an integer in every body, as JSON Schema (and the OpenAPI document) says")
    func wholeNumberFractions() throws {
        let app = try environment.makeApp()
        func send(_ method: String, _ path: String, _ body: String) throws -> HTTPResult {
            try client.send(method, path, token: app.serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
        }
        let later = nowMilliseconds() + 3_600_000
        let members = try send("PUT", "/v1/groups/g1/members", #"{"members": ["alice", 42.0]}"#)
        #expect(members.status == 200, "\(members.text)")
        let listed = try client.get("/v1/groups/g1/members", token: app.serverKey).json["data"] as? [[String: Any]]
        #expect(listed?.compactMap { $0["uid"] as? String }.sorted() == ["42", "alice"])
        let lookup = try send("POST", "/v1/users/alice/subscriptions/lookup", #"{"messageIds": [7.0]}"#)
        #expect((lookup.json["data"] as? [String: Any])?["7"] as? Bool == false)
        let settings = try send("PATCH", "/v1/settings/notifications", #"{"largeGroupThreshold": 50.0}"#)
        #expect(settings.json["largeGroupThreshold"] as? Int == 50)
        let preferences = try send("PATCH", "/v1/users/alice/preferences", """
            {"groupPreferences": {"messages": 3.0}, "mutePreferences": {"schedule": {"monday": {"from": 900.0, "to": 1.7e3}}}}
            """)
        #expect(preferences.status == 200, "\(preferences.text)")
        #expect((preferences.json["groupPreferences"] as? [String: Any])?["messages"] as? String == "SUBSCRIBE_TO_MENTIONS")
        let monday = ((preferences.json["mutePreferences"] as? [String: Any])?["schedule"] as? [String: Any])?["monday"] as? [String: Any]
        #expect(monday?["from"] as? Int == 900)
        #expect(monday?["to"] as? Int == 1700)
        let mutes = try send("PUT", "/v1/users/alice/mutes", #"{"conversations": [{"id": 5.0, "type": "group", "until": \#(later).0}]}"#)
        #expect((mutes.json["conversations"] as? [[String: Any]])?.first?["id"] as? String == "5", "\(mutes.text)")
        let claim = try send("POST", "/v1/jobs/claim", #"{"max": 10.0, "leaseSeconds": 30.0, "waitSeconds": 0.0}"#)
        #expect(claim.status == 200, "\(claim.text)")
        let ack = try send("POST", "/v1/jobs/ack", #"{"jobs": [{"id": "j1", "attempt": 1.0}]}"#)
        #expect(ack.json["stale"] as? [String] == ["j1"], "\(ack.text)")
        let fail = try send("POST", "/v1/jobs/fail", #"{"jobs": [{"id": "j1", "attempt": 2.0, "retryAfterSeconds": 5.0}]}"#)
        #expect(fail.json["stale"] as? [String] == ["j1"], "\(fail.text)")
        // A fraction is still not an integer.
        let fraction = try send("POST", "/v1/jobs/claim", #"{"max": 10.5}"#)
        #expect(fraction.status == 400)
        #expect(fraction.errorParams["field"] as? String == "max")
    }

    @Test("an unknown route is 404 and a wrong method 405, before any token check")
    func routes() throws {
        let missing = try client.get("/v1/nope")
        #expect(missing.status == 404)
        #expect(missing.errorCode == "ERR_NOT_FOUND")
        let wrongMethod = try client.send("PATCH", "/v1/apps")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.errorCode == "ERR_METHOD_NOT_ALLOWED")
        #expect(wrongMethod.headers["allow"] == "GET, POST")
    }

    @Test("every response carries a request id; a sane one from the client is kept")
    func requestID() throws {
        let generated = try client.get("/healthz")
        #expect((generated.headers["x-request-id"] ?? "").count == 16)
        let kept = try client.get("/v1/nope", headers: ["X-Request-Id": "trace-123"])
        #expect(kept.headers["x-request-id"] == "trace-123")
        let replaced = try client.get("/healthz", headers: ["X-Request-Id": "bad id with spaces"])
        #expect(replaced.headers["x-request-id"] != "bad id with spaces")
    }
}
