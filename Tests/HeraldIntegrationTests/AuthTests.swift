import Foundation
@testable import HeraldTestSupport
import Testing

@Suite("Authentication and roles", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct AuthTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let admin = TestEnvironment.adminToken

    init() throws {
        environment = try TestEnvironment.shared()
    }

    @Test("no token, a malformed header, or an unknown token is 401 on admin and app routes")
    func missingOrUnknownToken() throws {
        let unknownKey = "hk_0123456789abcdef_" + String(repeating: "0", count: 64)
        for path in ["/v1/apps", "/v1/whoami"] {
            for headers in [[:], ["Authorization": "Basic \(admin)"], ["Authorization": "Bearer"],
                            ["Authorization": "Bearer \(unknownKey)"], ["Authorization": "Bearer wrong-token"]] {
                let response = try client.get(path, headers: headers)
                #expect(response.status == 401, "\(path) \(headers)")
                #expect(response.errorCode == "AUTH_ERR_APIKEY_NOT_FOUND")
            }
        }
    }

    @Test("a key with the right id but the wrong secret is 401")
    func wrongSecret() throws {
        let app = try environment.makeApp()
        let genuine = app.serverKey
        let forged = String(genuine.dropLast(4)) + (genuine.hasSuffix("0000") ? "1111" : "0000")
        #expect(try client.get("/v1/whoami", token: genuine).status == 200)
        let response = try client.get("/v1/whoami", token: forged)
        #expect(response.status == 401)
        #expect(response.errorCode == "AUTH_ERR_APIKEY_NOT_FOUND")
    }

    @Test("each role may use its routes and is refused others with 403")
    func roleMatrix() throws {
        let app = try environment.makeApp()
        for role in ["ingest", "worker", "server"] {
            let key = app.keys[role]!
            let whoami = try client.get("/v1/whoami", token: key)
            #expect(whoami.status == 200, "\(role) on /v1/whoami")
            #expect(whoami.json["app"] as? String == app.id)
            #expect(whoami.json["role"] as? String == role)
            #expect(whoami.json["keyId"] as? String == app.keyIDs[role])

            // The admin API belongs to the admin token alone.
            for (method, path) in [("GET", "/v1/apps"), ("GET", "/v1/apps/\(app.id)/keys"),
                                   ("DELETE", "/v1/apps/\(app.id)/keys/\(app.keyIDs[role]!)")] {
                let refused = try client.send(method, path, token: key)
                #expect(refused.status == 403, "\(role) on \(method) \(path)")
                #expect(refused.errorCode == "AUTH_ERR_NO_ACCESS")
            }
            let create = try client.post("/v1/apps", token: key, json: #"{"id":"by-\#(role)"}"#)
            #expect(create.status == 403)
        }
        // The refused DELETEs above revoked nothing.
        #expect(try client.get("/v1/whoami", token: app.serverKey).status == 200)
    }

    @Test("a revoked key is refused from then on")
    func revokedKey() throws {
        let app = try environment.makeApp()
        #expect(try client.get("/v1/whoami", token: app.workerKey).status == 200)
        let revoke = try client.delete("/v1/apps/\(app.id)/keys/\(app.keyIDs["worker"]!)", token: admin)
        #expect(revoke.status == 204)
        let refused = try client.get("/v1/whoami", token: app.workerKey)
        #expect(refused.status == 401)
        #expect(refused.errorCode == "AUTH_ERR_APIKEY_NOT_FOUND")
        // The app's other keys still work.
        #expect(try client.get("/v1/whoami", token: app.serverKey).status == 200)
    }

    @Test("a key of app A naming app B in X-App-Id is refused; naming its own app is fine")
    func crossTenant() throws {
        let a = try environment.makeApp(prefix: "a")
        let b = try environment.makeApp(prefix: "b")
        for role in ["ingest", "worker", "server"] {
            let refused = try client.get("/v1/whoami", token: a.keys[role]!, headers: ["X-App-Id": b.id])
            #expect(refused.status == 403, "\(role) key of A acting in B")
            #expect(refused.errorCode == "AUTH_ERR_NO_ACCESS")
        }
        let own = try client.get("/v1/whoami", token: a.serverKey, headers: ["X-App-Id": a.id])
        #expect(own.status == 200)
        #expect(own.json["app"] as? String == a.id)
    }

    @Test("the admin token acts in an app named by X-App-Id")
    func adminActsInApp() throws {
        let app = try environment.makeApp()
        let acting = try client.get("/v1/whoami", token: admin, headers: ["X-App-Id": app.id])
        #expect(acting.status == 200)
        #expect(acting.json["app"] as? String == app.id)
        #expect(acting.json["role"] as? String == "admin")

        let missing = try client.get("/v1/whoami", token: admin)
        #expect(missing.status == 400)
        #expect(missing.errorCode == "ERR_BAD_REQUEST")
        #expect(missing.errorParams["field"] as? String == "X-App-Id")

        let unknown = try client.get("/v1/whoami", token: admin, headers: ["X-App-Id": "no-such-app-\(UUID().uuidString)"])
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == "ERR_APP_NOT_FOUND")
    }

    @Test("public routes need no token")
    func publicRoutes() throws {
        #expect(try client.get("/healthz").status == 200)
        #expect(try client.get("/readyz").status == 200)
    }
}
