import Glibc
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Secrets

extension Bench {
    // MARK: L3, user-token verification

    /// What a user token costs: parsing and verifying one (signature and claims, the code the
    /// server runs, without the key's database read) on one core, for each algorithm; then the
    /// same request over HTTP with a server key and with HS256 and ES256 user tokens (32
    /// connections, as L1), so the token's share of a whole request shows.
    func tokenVerification() throws {
        say("L3: user tokens …")
        let wallClock = Double(time(nil))
        let claims = #"{"sub":"bench-user","app":"bench","iat":\#(Int(wallClock)),"exp":\#(Int(wallClock) + 3600),"aud":"herald"}"#
        let rsa = PrivateKey.rsa(bits: 2048)!, ec = PrivateKey.ec(curve: "P-256")!
        let secret = Array(Base64URL.encode(Secrets.randomBytes(32)).utf8)
        let seconds = min(options.seconds, 3)
        var verified: [(UserToken.Algorithm, LoadResult)] = []
        for algorithm in UserToken.Algorithm.allCases {
            let material: UserToken.Key.Material
            let sign: ([UInt8]) -> [UInt8]
            switch algorithm {
            case .hs256: material = .secret(secret); sign = { Secrets.hmacSHA256(key: secret, message: $0) }
            case .rs256: material = .publicKey(PublicKey(pem: rsa.publicKeyPEM)!); sign = { rsa.sign(.rs256, message: $0)! }
            case .es256: material = .publicKey(PublicKey(pem: ec.publicKeyPEM)!); sign = { ec.sign(.es256, message: $0)! }
            }
            let key = UserToken.Key(kid: "tk_bench", app: "bench", algorithm: algorithm, material: material)
            let token = Self.token(kid: "tk_bench", alg: algorithm.rawValue, claims: claims, sign: sign)
            let result = runLoad(workers: 1, seconds: seconds) { _, log in
                let started = now()
                for _ in 0..<100 {
                    let grant = try UserToken.parse(token).verify(with: key, now: wallClock)
                    guard grant.uid == "bench-user" else { throw BenchError("verification gave \(grant)") }
                }
                log.record(started, ok: true, count: 100)
                return true
            }
            verified.append((algorithm, result))
        }

        // The same route over HTTP: a server key, then user tokens of two algorithms.
        let app = "bench-tokens-\(runID)"
        let keys = try makeApp(app)
        let connection = BenchConnection(host: host, port: port)
        let raised = try connection.request("PATCH", "/v1/settings/notifications", token: keys["server"],
                                            json: #"{"userRateLimit":{"perSecond":100000,"burst":100000}}"#)
        guard raised.status == 200 else { throw BenchError("settings: \(raised.status) \(raised.text)") }
        let hsKey = try connection.request("POST", "/v1/settings/token-keys", token: keys["server"], json: #"{"alg":"HS256"}"#)
        let esKey = try connection.request("POST", "/v1/settings/token-keys", token: keys["server"],
                                           json: #"{"alg":"ES256","publicKey":"\#(ec.publicKeyPEM.replacing("\n", with: "\\n"))"}"#)
        guard let hsKid = field(hsKey.text, "kid"), let hsSecret = field(hsKey.text, "secret"), let esKid = field(esKey.text, "kid") else {
            throw BenchError("token keys: \(hsKey.text) \(esKey.text)")
        }
        let appClaims = claims.replacing(#""app":"bench""#, with: #""app":"\#(app)""#)
        let credentials: [(String, String, String)] = [
            ("server key", keys["server"]!, "/v1/users/bench-user/preferences"),
            ("HS256 token", Self.token(kid: hsKid, alg: "HS256", claims: appClaims) { Secrets.hmacSHA256(key: Array(hsSecret.utf8), message: $0) },
             "/v1/me/preferences"),
            ("ES256 token", Self.token(kid: esKid, alg: "ES256", claims: appClaims) { ec.sign(.es256, message: $0)! }, "/v1/me/preferences"),
        ]
        var overHTTP: [(String, LoadResult)] = []
        for (name, token, path) in credentials {
            let port = self.port, host = self.host
            let result = runLoad(workers: 2, seconds: seconds) { _, log in
                let connections = ThreadLocalConnections.get(host: host, port: port, count: 16)
                let started = now()
                for connection in connections { try connection.send("GET", path, token: token) }
                for connection in connections {
                    let reply = try connection.receive()
                    log.record(started, ok: reply.status == 200, error: "status \(reply.status) \(reply.text.prefix(200))")
                }
                return true
            }
            overHTTP.append((name, result))
        }

        // A request's CPU on this machine: both cores for 1 / (server-key requests per second).
        let requestMicros = overHTTP[0].1.perSecond > 0 ? 2e6 / overHTTP[0].1.perSecond : 0
        for (algorithm, result) in verified {
            let micros = result.perSecond > 0 ? 1e6 / result.perSecond : 0
            let share = requestMicros > 0 ? micros / requestMicros : 0
            add("L3 \(algorithm.rawValue) token: parse and verify, one core", format(result.perSecond) + " tokens/s", nil,
                goal: "≤ 0.25 of a request's CPU: " + format(micros, digits: 1) + " µs, " + format(share, digits: 2), met: share <= 0.25)
        }
        for (name, result) in overHTTP {
            let ratio = overHTTP[0].1.perSecond > 0 ? result.perSecond / overHTTP[0].1.perSecond : 0
            add("L3 GET preferences over HTTP, \(name)", format(result.perSecond) + " req/s", result,
                goal: name == "server key" ? "" : format(ratio, digits: 2) + " of the server key's")
        }
    }

    /// A compact JWS of `claims` under a header naming `kid` and `alg`.
    static func token(kid: String, alg: String, claims: String, sign: ([UInt8]) -> [UInt8]) -> String {
        let input = Base64URL.encode(Array(#"{"alg":"\#(alg)","kid":"\#(kid)","typ":"JWT"}"#.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(sign(Array(input.utf8)))
    }
}
