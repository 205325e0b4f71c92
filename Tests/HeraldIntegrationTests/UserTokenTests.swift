import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Secrets
import Synchronization
@testable import HeraldTestSupport
import Testing

/// SPEC §15 over HTTP: token keys, user tokens of each algorithm on the `/v1/me/…` mirror, every
/// kind of bad token, the other credentials refused there, CORS and the per-user rate.
@Suite("User tokens", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct UserTokenTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000
    static let rsa = PrivateKey.rsa(bits: 2048)!
    static let ec = PrivateKey.ec(curve: "P-256")!

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// A key of `app`: its kid and how to sign with it.
    struct Signer {
        let kid: String
        let alg: String
        let sign: @Sendable ([UInt8]) -> [UInt8]

        /// A token with this key's header (or `header`), the claims given as they are.
        func token(_ claims: [String: Any], header: [String: Any]? = nil) -> String {
            let head = Base64URL.encode(Array(Events.json(header ?? ["alg": alg, "kid": kid, "typ": "JWT"]).utf8))
            let body = Base64URL.encode(Array(Events.json(claims).utf8))
            let input = head + "." + body
            return input + "." + Base64URL.encode(sign(Array(input.utf8)))
        }
    }

    func createKey(_ app: TestApp, _ body: [String: Any]) throws -> HTTPResult {
        try client.post("/v1/settings/token-keys", token: app.serverKey, json: Events.json(body))
    }

    func hs256(_ app: TestApp) throws -> Signer {
        let created = try createKey(app, ["alg": "HS256"])
        #expect(created.status == 201, "\(created.text)")
        let secret = try #require(created.json["secret"] as? String)
        return Signer(kid: try #require(created.json["kid"] as? String), alg: "HS256") {
            Secrets.hmacSHA256(key: Array(secret.utf8), message: $0)
        }
    }

    func signer(_ app: TestApp, alg: String) throws -> Signer {
        if alg == "HS256" { return try hs256(app) }
        let key = alg == "RS256" ? Self.rsa : Self.ec
        let created = try createKey(app, ["alg": alg, "publicKey": key.publicKeyPEM])
        #expect(created.status == 201, "\(created.text)")
        #expect(created.json["secret"] == nil)
        return Signer(kid: try #require(created.json["kid"] as? String), alg: alg) {
            key.sign(alg == "RS256" ? .rs256 : .es256, message: $0)!
        }
    }

    var now: Int { Int(Date().timeIntervalSince1970) }

    func claims(_ app: TestApp, _ uid: String = "alice", _ changes: [String: Any?] = [:]) -> [String: Any] {
        var claims: [String: Any] = ["sub": uid, "app": app.id, "iat": now, "exp": now + 600]
        for (name, value) in changes { claims[name] = value }
        return claims
    }

    @Test("token keys: HS256 secret shown once, PEM public keys checked, listed without secrets, deleted")
    func keys() throws {
        let app = try environment.makeApp(prefix: "tokens")
        let hs = try createKey(app, ["alg": "HS256"])
        #expect(hs.status == 201)
        #expect(Set(hs.json.keys) == ["kid", "alg", "secret", "createdAt"])
        #expect((hs.json["secret"] as? String)?.count ?? 0 >= 43)
        let rs = try createKey(app, ["alg": "RS256", "publicKey": Self.rsa.publicKeyPEM])
        #expect(rs.status == 201 && Set(rs.json.keys) == ["kid", "alg", "createdAt"])
        let es = try createKey(app, ["alg": "ES256", "publicKey": Self.ec.publicKeyPEM])
        #expect(es.status == 201 && es.json["alg"] as? String == "ES256")

        let list = try client.get("/v1/settings/token-keys", token: app.serverKey)
        #expect(list.status == 200)
        let rows = list.json["data"] as? [[String: Any]] ?? []
        #expect(rows.map { $0["kid"] as? String } == [hs, rs, es].map { $0.json["kid"] as? String })
        #expect(rows.allSatisfy { Set($0.keys) == ["kid", "alg", "createdAt"] })
        #expect(!list.text.contains(hs.json["secret"] as? String ?? "-"))

        let refused: [([String: Any], String)] = [
            (["alg": "none"], "alg"), (["alg": "HS512"], "alg"),
            (["alg": "HS256", "publicKey": Self.rsa.publicKeyPEM], "publicKey"),
            (["alg": "RS256"], "publicKey"), (["alg": "ES256", "publicKey": "not a key"], "publicKey"),
            (["alg": "RS256", "publicKey": PrivateKey.rsa(bits: 1024)!.publicKeyPEM], "publicKey"),
            (["alg": "RS256", "publicKey": Self.ec.publicKeyPEM], "publicKey"),
            (["alg": "ES256", "publicKey": Self.rsa.publicKeyPEM], "publicKey"),
            (["alg": "ES256", "publicKey": PrivateKey.ec(curve: "P-384")!.publicKeyPEM], "publicKey"),
            (["alg": "HS256", "publickey": "x"], "publickey"),
        ]
        for (body, field) in refused {
            let response = try createKey(app, body)
            #expect(response.status == 400 && response.errorParams["field"] as? String == field, "\(body): \(response.text)")
        }
        #expect(try client.post("/v1/settings/token-keys", token: app.workerKey, json: #"{"alg":"HS256"}"#).status == 403)

        let kid = try #require(rs.json["kid"] as? String)
        // A NUL in the path is refused, not taken as the end of the id (which would name this key).
        let truncated = try client.delete("/v1/settings/token-keys/\(kid)%00x", token: app.serverKey)
        #expect(truncated.status == 400 && truncated.errorParams["field"] as? String == "kid", "\(truncated.text)")
        #expect((try client.get("/v1/settings/token-keys", token: app.serverKey).json["data"] as? [Any])?.count == 3)
        #expect(try client.delete("/v1/settings/token-keys/\(kid)", token: app.serverKey).status == 204)
        let again = try client.delete("/v1/settings/token-keys/\(kid)", token: app.serverKey)
        #expect(again.status == 404 && again.errorCode == "ERR_NOT_FOUND")
        let other = try environment.makeApp(prefix: "tokens")
        #expect(try client.delete("/v1/settings/token-keys/\(hs.json["kid"] as? String ?? "")", token: other.serverKey).status == 404)
        #expect((try client.get("/v1/settings/token-keys", token: app.serverKey).json["data"] as? [Any])?.count == 2)
    }

    @Test("a valid token of each algorithm gets the user route's answers on /v1/me", arguments: ["HS256", "RS256", "ES256"])
    func mirror(alg: String) throws {
        let app = try environment.makeApp(prefix: "tokens")
        try app.ingest([Events.member("j1", "member.joined", uid: "alice", at: past - 10), Events.member("j2", "member.joined", uid: "bob", at: past - 9),
                        Events.message("e1", id: "m1", sender: "bob", at: past),
                        Events.message("e2", id: "r1", sender: "bob", parent: "m1", at: past + 1, mentions: ["alice"])], client: client)
        let token = try signer(app, alg: alg).token(claims(app))

        let mine = try client.get("/v1/me/threads", token: token)
        let theirs = try client.get("/v1/users/alice/threads", token: app.serverKey)
        #expect(mine.status == 200, "\(mine.text)")
        #expect(mine.text == theirs.text)
        #expect((mine.json["data"] as? [[String: Any]])?.first?["parentMessageId"] as? String == "m1")

        let subscription = try client.get("/v1/me/threads/m1/subscription", token: token)
        #expect(subscription.status == 200 && subscription.json["subscribed"] as? Bool == true)
        let unsubscribe = try client.send("DELETE", "/v1/me/threads/m1/subscription", token: token,
                                          headers: ["Content-Type": "application/json"], body: Array("{}".utf8))
        #expect(unsubscribe.status == 200, "\(unsubscribe.text)")
        #expect(try app.subscribed("alice", "m1", client: client) == false)

        let patch = try client.send("PATCH", "/v1/me/preferences", token: token, headers: ["Content-Type": "application/json"],
                                    body: Array(#"{"groupPreferences":{"replies":"SUBSCRIBE_TO_MENTIONS"}}"#.utf8))
        #expect(patch.status == 200)
        let seen = try client.get("/v1/users/alice/preferences", token: app.serverKey)
        #expect((seen.json["groupPreferences"] as? [String: Any])?["replies"] as? String == "SUBSCRIBE_TO_MENTIONS")
        #expect(try client.get("/v1/users/bob/preferences", token: app.serverKey).text != seen.text)

        let explain = try client.get("/v1/me/messages/r1/routing", token: token)
        let explained = try client.get("/v1/users/alice/messages/r1/routing", token: app.serverKey)
        #expect(explain.status == 200 && explain.text == explained.text)
    }

    @Test("every /v1/users/{uid}/… route has its /v1/me/… mirror, which a user token may call")
    func everyUserRouteMirrored() throws {
        let app = try environment.makeApp(prefix: "tokens")
        try app.ingest([Events.member("j1", "member.joined", uid: "alice", at: past - 10), Events.message("e1", id: "m1", sender: "alice", at: past)],
                       client: client)
        let token = try hs256(app).token(claims(app))
        // a level to remove, so that the mirror's DELETE answers 204 rather than its own 404
        #expect(try client.send("PUT", "/v1/users/alice/conversations/group_g1/level", token: app.serverKey,
                                headers: ["Content-Type": "application/json"], body: Array(#"{"level": "all"}"#.utf8)).status == 200)
        let routes = environment.server.service.routes
        let users = routes.filter { $0.pattern.hasPrefix("/v1/users/{uid}/") }
        #expect(users.count >= 13)
        for route in users {
            let mirror = "/v1/me/" + route.pattern.dropFirst("/v1/users/{uid}/".count)
            #expect(routes.contains { $0.method == route.method && $0.pattern == mirror }, "\(route.method) \(mirror)")
            let path = mirror.replacing("{messageId}", with: "m1").replacing("{deviceId}", with: "d1")
                .replacing("{conversationId}", with: "group_g1")
            let response = try client.send(route.method.rawValue, path, token: token, headers: ["Content-Type": "application/json"], body: Array("{}".utf8))
            // Served and allowed: no 401/403/405, and no route-level 404 (a domain 404 such as
            // ERR_DEVICE_NOT_FOUND is the route answering).
            #expect(![401, 403, 405].contains(response.status) && response.errorCode != "ERR_NOT_FOUND",
                    "\(route.method.rawValue) \(path): \(response.text)")
        }
        #expect(routes.filter { $0.pattern.hasPrefix("/v1/me/") }.count == users.count)
    }

    @Test("every kind of bad token is 401 with its code and RFC 6750's challenge")
    func badTokens() throws {
        let app = try environment.makeApp(prefix: "tokens")
        let other = try environment.makeApp(prefix: "tokens")
        let hs = try hs256(app)
        let rs = try signer(app, alg: "RS256")
        let es = try signer(app, alg: "ES256")
        let deleted = try hs256(app)
        #expect(try client.delete("/v1/settings/token-keys/\(deleted.kid)", token: app.serverKey).status == 204)
        let otherKey = try hs256(other)
        let good = hs.token(claims(app))
        let parts = good.split(separator: ".").map(String.init)
        let pem = Self.rsa.publicKeyPEM
        // HS/RS confusion: an HMAC keyed with the RS256 key's public PEM, under its kid.
        let confused = Signer(kid: rs.kid, alg: "HS256") { Secrets.hmacSHA256(key: Array(pem.utf8), message: $0) }
        let none = Base64URL.encode(Array(#"{"alg":"none","kid":"\#(hs.kid)"}"#.utf8)) + "." + parts[1] + "."
        let flipped = parts[0] + "." + parts[1] + "." + String(parts[2].dropLast()) + (parts[2].hasSuffix("A") ? "Q" : "A")
        let swapped = parts[0] + "." + Base64URL.encode(Array(Events.json(claims(app, "bob")).utf8)) + "." + parts[2]
        func raw(_ header: String, _ payload: String) -> String {
            let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
            return input + "." + Base64URL.encode(hs.sign(Array(input.utf8)))
        }
        let expired = "AUTH_ERR_TOKEN_EXPIRED", invalid = "AUTH_ERR_TOKEN_INVALID"
        let cases: [(String, String, String)] = [
            ("alg none", none, invalid),
            ("alg none, signed", hs.token(claims(app), header: ["alg": "none", "kid": hs.kid]), invalid),
            ("unknown kid", hs.token(claims(app), header: ["alg": "HS256", "kid": "tk_000000000000000000000000"]), invalid),
            ("no kid", hs.token(claims(app), header: ["alg": "HS256"]), invalid),
            ("HS256 with an RS256 key's PEM as secret", confused.token(claims(app)), invalid),
            ("RS256 header on an ES256 key", Signer(kid: es.kid, alg: "RS256", sign: rs.sign).token(claims(app)), invalid),
            ("ES256 signature under an RS256 header", Signer(kid: rs.kid, alg: "RS256", sign: es.sign).token(claims(app)), invalid),
            ("a flipped signature", flipped, invalid),
            ("claims changed after signing", swapped, invalid),
            ("crit header", hs.token(claims(app), header: ["alg": "HS256", "kid": hs.kid, "crit": ["exp"]]), invalid),
            ("two parts", parts[0] + "." + parts[1], invalid),
            ("four parts", good + ".x", invalid),
            ("padding", parts[0] + "." + parts[1] + "=." + parts[2], invalid),
            ("standard base64 characters", parts[0] + "." + parts[1] + "." + parts[2].replacing("-", with: "+").replacing("_", with: "/") + "+", invalid),
            ("header not JSON", raw("alg", "{}"), invalid),
            ("claims an array", raw(#"{"alg":"HS256","kid":"\#(hs.kid)"}"#, #"["sub"]"#), invalid),
            ("duplicate sub", raw(#"{"alg":"HS256","kid":"\#(hs.kid)"}"#, #"{"sub":"alice","sub":"bob"}"#), invalid),
            ("no sub", hs.token(claims(app, "alice", ["sub": nil])), invalid),
            ("kid with U+0000", raw(#"{"alg":"HS256","kid":"\#(hs.kid)\u0000"}"#, Events.json(claims(app))), invalid),
            ("kid U+0000 alone", raw(#"{"alg":"HS256","kid":"\u0000"}"#, Events.json(claims(app))), invalid),
            ("sub with U+0000", raw(#"{"alg":"HS256","kid":"\#(hs.kid)"}"#, #"{"sub":"a\u0000","app":"\#(app.id)","exp":\#(now + 600)}"#), invalid),
            ("sub not a uid", hs.token(claims(app, "a/b")), invalid),
            ("no exp", hs.token(claims(app, "alice", ["exp": nil])), invalid),
            ("exp a string", hs.token(claims(app, "alice", ["exp": String(now + 60)])), invalid),
            ("another app", hs.token(claims(app, "alice", ["app": other.id])), invalid),
            ("no app", hs.token(claims(app, "alice", ["app": nil])), invalid),
            ("a key of another app", otherKey.token(claims(app)), invalid),
            ("aud without herald", hs.token(claims(app, "alice", ["aud": "chat"])), invalid),
            ("aud list without herald", hs.token(claims(app, "alice", ["aud": ["chat", "push"]])), invalid),
            ("exp 8 days after iat", hs.token(claims(app, "alice", ["exp": now + 8 * 86_400])), invalid),
            ("exp 8 days ahead, no iat", hs.token(claims(app, "alice", ["iat": nil, "exp": now + 8 * 86_400])), invalid),
            ("a deleted key", deleted.token(claims(app)), invalid),
            ("not a token at all", "hello", invalid),
            ("expired", hs.token(claims(app, "alice", ["iat": now - 600, "exp": now - 120])), expired),
            ("not yet valid", hs.token(claims(app, "alice", ["nbf": now + 120])), expired),
            ("issued in the future", hs.token(claims(app, "alice", ["iat": now + 120, "exp": now + 600])), expired),
        ]
        for (name, token, code) in cases {
            let response = try client.get("/v1/me/threads", token: token)
            #expect(response.status == 401 && response.errorCode == code, "\(name): \(response.status) \(response.text)")
            #expect(response.headers["www-authenticate"] == #"Bearer realm="herald", error="invalid_token""#, "\(name)")
            #expect(!response.text.contains(pem.prefix(40)))
        }
        let missing = try client.get("/v1/me/threads")
        #expect(missing.status == 401 && missing.errorCode == "AUTH_ERR_APIKEY_NOT_FOUND")
        #expect(missing.headers["www-authenticate"] == #"Bearer realm="herald""#)

        let fine: [(String, String)] = [
            ("the other algorithms", rs.token(claims(app))), ("ES256", es.token(claims(app))),
            ("aud herald", hs.token(claims(app, "alice", ["aud": "herald"]))),
            ("aud list with herald", hs.token(claims(app, "alice", ["aud": ["chat", "herald"]]))),
            ("expired within the leeway", hs.token(claims(app, "alice", ["iat": now - 600, "exp": now - 30]))),
            ("nbf within the leeway", hs.token(claims(app, "alice", ["nbf": now + 30]))),
            ("exactly 7 days", hs.token(claims(app, "alice", ["exp": now + 7 * 86_400]))),
            ("no iat", hs.token(claims(app, "alice", ["iat": nil]))),
            ("fractional times", hs.token(claims(app, "alice", ["iat": Double(now) - 0.5, "exp": Double(now) + 60.25]))),
        ]
        for (name, token) in fine {
            let response = try client.get("/v1/me/threads", token: token)
            #expect(response.status == 200, "\(name): \(response.text)")
        }
    }

    @Test("API keys and the admin token are refused on /v1/me; a user token on every other route")
    func otherCredentials() throws {
        let app = try environment.makeApp(prefix: "tokens")
        let other = try environment.makeApp(prefix: "tokens")
        let token = try hs256(app).token(claims(app))
        for key in [app.serverKey, app.workerKey, app.ingestKey] {
            let response = try client.get("/v1/me/threads", token: key)
            #expect(response.status == 403 && response.errorCode == "AUTH_ERR_NO_ACCESS")
        }
        let admin = try client.get("/v1/me/threads", token: TestEnvironment.adminToken, headers: ["X-App-Id": app.id])
        #expect(admin.status == 403 && admin.errorCode == "AUTH_ERR_NO_ACCESS")
        for (method, path) in [("GET", "/v1/users/alice/threads"), ("GET", "/v1/whoami"), ("GET", "/v1/apps"),
                               ("POST", "/v1/events"), ("GET", "/v1/settings/notifications"), ("GET", "/v1/jobs/stats"),
                               ("GET", "/v1/settings/token-keys")] {
            let response = try client.send(method, path, token: token, headers: ["Content-Type": "application/json"], body: Array("[]".utf8))
            #expect(response.status == 403 && response.errorCode == "AUTH_ERR_NO_ACCESS", "\(method) \(path): \(response.text)")
        }
        let bad = try client.get("/v1/whoami", token: token + "x")
        #expect(bad.status == 401 && bad.errorCode == "AUTH_ERR_TOKEN_INVALID")
        let named = try client.get("/v1/me/threads", token: token, headers: ["X-App-Id": other.id])
        #expect(named.status == 403)
        #expect(try client.get("/v1/me/threads", token: token, headers: ["X-App-Id": app.id]).status == 200)
    }

    @Test("CORS: preflights for origins an app lists; the request allowed only for the token's app")
    func cors() throws {
        let app = try environment.makeApp(prefix: "tokens")
        let other = try environment.makeApp(prefix: "tokens")
        let origin = "https://\(app.id).example"
        let set = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                  body: Array(Events.json(["corsOrigins": [origin, "http://localhost:3000"]]).utf8))
        #expect(set.status == 200 && set.json["corsOrigins"] as? [String] == [origin, "http://localhost:3000"])

        let preflight = try client.send("OPTIONS", "/v1/me/threads/m1/subscription", headers: [
            "Origin": origin, "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization, content-type"])
        #expect(preflight.status == 204)
        #expect(preflight.headers["access-control-allow-origin"] == origin)
        #expect(preflight.headers["access-control-allow-methods"] == "DELETE, GET, PUT")
        #expect(preflight.headers["access-control-allow-headers"]?.lowercased().contains("authorization") == true)
        #expect(preflight.headers["access-control-max-age"] == "600")
        #expect(preflight.headers["access-control-allow-credentials"] == nil)
        #expect(preflight.headers["vary"] == "Origin")
        for (headers, name) in [(["Origin": "https://evil.example", "Access-Control-Request-Method": "GET"], "unlisted origin"),
                                (["Origin": origin, "Access-Control-Request-Method": "PATCH"], "method not served")] {
            let refused = try client.send("OPTIONS", "/v1/me/threads", headers: headers)
            #expect(refused.status == 403 && refused.headers["access-control-allow-origin"] == nil, "\(name)")
        }
        #expect(try client.send("OPTIONS", "/v1/me/threads").status == 405)

        let mine = try hs256(app)
        let response = try client.get("/v1/me/threads", token: mine.token(claims(app)), headers: ["Origin": origin])
        #expect(response.status == 200 && response.headers["access-control-allow-origin"] == origin)
        #expect(response.headers["vary"] == "Origin" && response.headers["access-control-allow-credentials"] == nil)
        #expect(response.headers["access-control-expose-headers"]?.contains("Retry-After") == true)
        let elsewhere = try client.get("/v1/me/threads", token: try hs256(other).token(claims(other)), headers: ["Origin": origin])
        #expect(elsewhere.status == 200 && elsewhere.headers["access-control-allow-origin"] == nil && elsewhere.headers["vary"] == "Origin")
        let expired = try client.get("/v1/me/threads", token: mine.token(claims(app, "alice", ["iat": now - 900, "exp": now - 300])),
                                     headers: ["Origin": origin])
        #expect(expired.status == 401 && expired.headers["access-control-allow-origin"] == origin)
        let forged = try client.get("/v1/me/threads", token: mine.token(claims(app)) + "A", headers: ["Origin": origin])
        #expect(forged.status == 401 && forged.headers["access-control-allow-origin"] == nil)

        for (value, field) in [(["https://App.example"], "corsOrigins[0]"), (["https://a.example/"], "corsOrigins[0]"),
                               (["*"], "corsOrigins[0]"), ([origin, "ftp://x"], "corsOrigins[1]")] {
            let refused = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey,
                                          headers: ["Content-Type": "application/json"], body: Array(Events.json(["corsOrigins": value]).utf8))
            #expect(refused.status == 400 && refused.errorCode == "ERR_INVALID_PREFERENCE" && refused.errorParams["field"] as? String == field,
                    "\(value): \(refused.text)")
        }
    }

    @Test("userRateLimit: exactly burst requests pass under concurrency, then 429 with Retry-After; per user")
    func rateLimit() throws {
        let app = try environment.makeApp(prefix: "tokens")
        #expect(try client.get("/v1/settings/notifications", token: app.serverKey).json["userRateLimit"] as? [String: Int] == ["perSecond": 20, "burst": 40])
        let set = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                  body: Array(#"{"userRateLimit":{"perSecond":0.01,"burst":5}}"#.utf8))
        #expect(set.status == 200, "\(set.text)")
        let signer = try hs256(app)
        let token = signer.token(claims(app))
        let statuses = ThreadSafeList<(Int, String?)>()
        let client = self.client
        DispatchQueue.concurrentPerform(iterations: 24) { _ in
            if let response = try? client.get("/v1/me/preferences", token: token) {
                statuses.append((response.status, response.headers["retry-after"]))
            }
        }
        let all = statuses.all
        #expect(all.count == 24)
        #expect(all.filter { $0.0 == 200 }.count == 5)
        #expect(all.filter { $0.0 == 429 }.count == 19)
        #expect(all.filter { $0.0 == 429 }.allSatisfy { Int($0.1 ?? "") ?? 0 >= 1 })
        let limited = try client.get("/v1/me/preferences", token: token)
        #expect(limited.status == 429 && limited.errorCode == "ERR_OVERLOADED")
        #expect(try client.get("/v1/me/preferences", token: signer.token(claims(app, "bob"))).status == 200)
        #expect(try client.get("/v1/users/alice/preferences", token: app.serverKey).status == 200)

        for body in [#"{"userRateLimit":{"perSecond":0}}"#, #"{"userRateLimit":{"perSecond":1e-12}}"#, #"{"userRateLimit":{"perSecond":0.0009}}"#, #"{"userRateLimit":{"burst":0}}"#, #"{"userRateLimit":{"rate":1}}"#, #"{"userRateLimit":5}"#] {
            let refused = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey,
                                          headers: ["Content-Type": "application/json"], body: Array(body.utf8))
            #expect(refused.status == 400 && (refused.errorParams["field"] as? String ?? "").hasPrefix("userRateLimit"), "\(body)")
        }
    }
}

/// Results gathered from several threads.
final class ThreadSafeList<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var all: [T] { items.withLock { $0 } }
}
