import Foundation
@testable import HeraldTestSupport
import Testing

@Suite("Admin API: apps and keys", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct AdminAPITests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let admin = TestEnvironment.adminToken

    init() throws {
        environment = try TestEnvironment.shared()
    }

    @Test("creating an app answers 201 with its id and time; a second time 409")
    func createApp() throws {
        let id = "create-\(UUID().uuidString.prefix(8).lowercased())"
        let before = Int(Date().timeIntervalSince1970 * 1000) - 5000
        let created = try client.post("/v1/apps", token: admin, json: #"{"id":"\#(id)"}"#)
        #expect(created.status == 201)
        #expect(created.json["id"] as? String == id)
        #expect((created.json["createdAt"] as? Int ?? 0) > before)
        let again = try client.post("/v1/apps", token: admin, json: #"{"id":"\#(id)"}"#)
        #expect(again.status == 409)
        #expect(again.errorCode == "ERR_ALREADY_EXISTS")
    }

    @Test("apps page with an exclusive cursor: every app once, hasMore exact")
    func paging() throws {
        var created: Set<String> = []
        for _ in 0..<5 { created.insert(try environment.makeApp(prefix: "page").id) }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let path = "/v1/apps?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
            let page = try client.get(path, token: admin)
            #expect(page.status == 200)
            let data = page.json["data"] as? [[String: Any]] ?? []
            let meta = page.json["meta"] as? [String: Any] ?? [:]
            seen += data.compactMap { $0["id"] as? String }
            let hasMore = meta["hasMore"] as? Bool ?? false
            cursor = meta["next"] as? String
            #expect(hasMore == (cursor != nil))
            #expect(data.count <= 2)
            pages += 1
        } while cursor != nil && pages < 10_000
        #expect(Set(seen).count == seen.count, "no app twice")
        #expect(created.isSubset(of: Set(seen)))
        #expect(seen == seen.sorted(), "ordered by id")
    }

    @Test("list limits and cursors are validated")
    func listValidation() throws {
        for limit in ["0", "1001", "-1", "ten", ""] {
            let response = try client.get("/v1/apps?limit=\(limit)", token: admin)
            #expect(response.status == 400, "limit=\(limit)")
            #expect(response.errorCode == "ERR_INVALID_LIMIT")
            #expect(response.errorParams["max"] as? Int == 1000)
        }
        let tampered = try client.get("/v1/apps?cursor=not-a-cursor", token: admin)
        #expect(tampered.status == 400)
        #expect(tampered.errorCode == "ERR_BAD_REQUEST")
        #expect(tampered.errorParams["field"] as? String == "cursor")
    }

    @Test("a key is shown once: listing shows id, role, label and time, never the secret")
    func keys() throws {
        let app = try environment.makeApp()
        let created = try client.post("/v1/apps/\(app.id)/keys", token: admin, json: #"{"role":"worker","label":"pusher 1"}"#)
        #expect(created.status == 201)
        let secret = try #require(created.json["key"] as? String)
        let id = try #require(created.json["id"] as? String)
        #expect(created.json["role"] as? String == "worker")
        #expect(created.json["label"] as? String == "pusher 1")
        #expect(created.json["createdAt"] is Int)

        let list = try client.get("/v1/apps/\(app.id)/keys", token: admin)
        #expect(list.status == 200)
        let data = list.json["data"] as? [[String: Any]] ?? []
        #expect(data.count == 4)
        let meta = list.json["meta"] as? [String: Any]
        #expect(meta?["hasMore"] as? Bool == false && meta?["next"] is NSNull, "SPEC §3's envelope: \(list.text)")
        let entry = try #require(data.first { $0["id"] as? String == id })
        #expect(entry["role"] as? String == "worker")
        #expect(entry["label"] as? String == "pusher 1")
        #expect(entry["key"] == nil)
        for key in app.keys.values + [secret] {
            #expect(!list.text.contains(String(key.suffix(64))), "no secret in the list")
        }

        // The stored row holds a digest, not the secret.
        let connection = try environment.connection()
        let stored = try connection.query("SELECT encode(secret_hash, 'hex') FROM app_keys WHERE id = \(id)")
        let digest = try stored[0].decode(0, as: String.self)
        #expect(digest.count == 64)
        #expect(digest != String(secret.suffix(64)))
    }

    @Test("revoking: 204, gone from the list, refused; unknown keys and apps are 404")
    func revoke() throws {
        let app = try environment.makeApp()
        let keyID = app.keyIDs["ingest"]!
        #expect(try client.delete("/v1/apps/\(app.id)/keys/\(keyID)", token: admin).status == 204)
        #expect(try client.delete("/v1/apps/\(app.id)/keys/\(keyID)", token: admin).status == 204, "idempotent")
        let list = try client.get("/v1/apps/\(app.id)/keys", token: admin)
        #expect(!(list.text.contains(keyID)))
        #expect(try client.get("/v1/whoami", token: app.ingestKey).status == 401)

        let unknownKey = try client.delete("/v1/apps/\(app.id)/keys/ffffffffffffffff", token: admin)
        #expect(unknownKey.status == 404)
        let other = try environment.makeApp()
        let foreign = try client.delete("/v1/apps/\(other.id)/keys/\(app.keyIDs["server"]!)", token: admin)
        #expect(foreign.status == 404, "a key is revoked only through its own app")
        #expect(try client.get("/v1/whoami", token: app.serverKey).status == 200)
        let unknownApp = try client.get("/v1/apps/no-such-app-\(UUID().uuidString)/keys", token: admin)
        #expect(unknownApp.status == 404)
        #expect(unknownApp.errorCode == "ERR_APP_NOT_FOUND")
        let keyForUnknownApp = try client.post("/v1/apps/no-such-app-x/keys", token: admin, json: #"{"role":"server"}"#)
        #expect(keyForUnknownApp.status == 404)
        #expect(keyForUnknownApp.errorCode == "ERR_APP_NOT_FOUND")
    }

    @Test("no secret reaches the log: neither the admin token nor any key")
    func noSecretsInLogs() throws {
        let app = try environment.makeApp()
        _ = try client.get("/v1/whoami", token: app.serverKey)
        _ = try client.get("/v1/whoami", token: app.serverKey + "x")
        _ = try client.get("/v1/apps", token: TestEnvironment.adminToken)
        let lines = environment.logs.all
        #expect(!lines.isEmpty)
        for line in lines {
            #expect(!line.contains(TestEnvironment.adminToken))
            for key in app.keys.values { #expect(!line.contains(String(key.suffix(64)))) }
        }
    }

    @Test("one JSON log line per request with id, method, route, status and duration")
    func accessLog() throws {
        let response = try client.get("/v1/nope", headers: ["X-Request-Id": "log-\(UUID().uuidString.prefix(8))"])
        let id = try #require(response.headers["x-request-id"])
        // the line is written once the answer has gone out: it may come after the client's read
        let logs = environment.logs
        #expect(eventually(seconds: 5) { logs.all.contains { $0.contains(id) } })
        let line = try #require(logs.all.first { $0.contains(id) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["requestId"] as? String == id)
        #expect(object["method"] as? String == "GET")
        #expect(object["route"] as? String == "unmatched")
        #expect(object["status"] as? Int == 404)
        #expect(object["durationMs"] is Double)
        #expect(object["level"] as? String == "info")
        #expect(object["ts"] is Int)
    }

    @Test("a valid W3C traceparent, of the request or of its CloudEvents, reaches the log line; nothing else of it")
    func traceparent() throws {
        let logs = environment.logs
        func line(_ id: String) throws -> [String: Any] {
            // written once the answer has gone out: it may come after the client's read
            #expect(eventually(seconds: 5) { logs.all.contains { $0.contains(id) } })
            let text = try #require(logs.all.first { $0.contains(id) })
            return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        }
        let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let good = "trace-\(UUID().uuidString.prefix(8))"
        _ = try client.get("/healthz", headers: ["X-Request-Id": good, "traceparent": trace])
        #expect(try line(good)["traceparent"] as? String == trace)
        let bad = "trace-\(UUID().uuidString.prefix(8))"
        _ = try client.get("/healthz", headers: ["X-Request-Id": bad, "traceparent": "00-not-a-trace-secret-value"])
        #expect(try line(bad)["traceparent"] == nil)
        #expect(!environment.logs.all.contains { $0.contains("secret-value") })

        let app = try environment.makeApp(prefix: "trace")
        let eventTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        var event = Events.message("tr-1", id: "tr1", sender: "alice", at: nowMilliseconds(), text: "hi")
        event["traceparent"] = eventTrace
        var invalid = Events.message("tr-2", id: "tr2", sender: "alice", at: nowMilliseconds(), text: "hi")
        invalid["traceparent"] = "zz"
        let ingest = "trace-\(UUID().uuidString.prefix(8))"
        let response = try client.post("/v1/events", token: app.ingestKey, json: Events.json([event, invalid]),
                                       headers: ["Content-Type": "application/cloudevents-batch+json", "X-Request-Id": ingest])
        #expect(response.status == 200, "\(response.text)")
        #expect(try line(ingest)["eventTraceparents"] as? [String] == [eventTrace])
    }
}
