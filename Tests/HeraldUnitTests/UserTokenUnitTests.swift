@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Foundation
import Secrets
import Testing

/// The pure parts of SPEC §15: base64url, the token's form and claims at a fixed time, origins,
/// the token bucket.
@Suite("User tokens (pure)")
struct UserTokenUnitTests {
    @Test("base64url round-trips every length and refuses non-canonical text")
    func base64URL() throws {
        for count in 0...40 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Base64URL.decode(Array(text.utf8)) == bytes)
            let standard = Data(bytes).base64EncodedString().replacing("+", with: "-").replacing("/", with: "_").replacing("=", with: "")
            #expect(text == standard)
        }
        // "QQ" is "A"; "QR" has a non-zero padding bit; "Q" alone is no byte string; "=" is padding.
        #expect(Base64URL.decode(Array("QQ".utf8)) == [0x41])
        for bad in ["QR", "Q", "QQ==", "Q Q", "QQ+", "QQ/", "QQ\n"] {
            #expect(Base64URL.decode(Array(bad.utf8)) == nil, "\(bad)")
        }
    }

    static let now: Double = 1_800_000_000
    static let secret = Array("a shared secret".utf8)
    static let key = UserToken.Key(kid: "tk_1", app: "acme", algorithm: .hs256, material: .secret(secret))

    func token(_ claims: String, header: String = #"{"alg":"HS256","kid":"tk_1"}"#, secret: [UInt8] = secret) -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        return input + "." + Base64URL.encode(Secrets.hmacSHA256(key: secret, message: Array(input.utf8)))
    }

    func verify(_ text: String, key: UserToken.Key = key) -> Result<UserToken.Grant, UserToken.Rejection> {
        Result { () throws(UserToken.Rejection) -> UserToken.Grant in try UserToken.parse(text).verify(with: key, now: Self.now) }
    }

    @Test("claims: sub, app, exp required; aud, nbf, iat and the 7-day bound; 60 s leeway")
    func claims() {
        let exp = Int(Self.now) + 300
        #expect(verify(token(#"{"sub":"alice","app":"acme","exp":\#(exp)}"#)) == .success(.init(uid: "alice", app: "acme", kid: "tk_1")))
        let cases: [(String, String)] = [
            (#"{"app":"acme","exp":\#(exp)}"#, "invalid"),
            (#"{"sub":"alice","exp":\#(exp)}"#, "invalid"),
            (#"{"sub":"alice","app":"acme"}"#, "invalid"),
            (#"{"sub":"alice","app":"other","exp":\#(exp)}"#, "invalid"),
            (#"{"sub":"","app":"acme","exp":\#(exp)}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"aud":"x"}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"aud":["herald",1]}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"aud":["x","herald"]}"#, "ok"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"exp":\#(exp)}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":true}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":\#(Int(Self.now) - 61)}"#, "expired"),
            (#"{"sub":"alice","app":"acme","exp":\#(Int(Self.now) - 59)}"#, "ok"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"nbf":\#(Int(Self.now) + 61)}"#, "expired"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"nbf":\#(Int(Self.now) + 59)}"#, "ok"),
            (#"{"sub":"alice","app":"acme","exp":\#(exp),"iat":\#(Int(Self.now) + 61)}"#, "expired"),
            (#"{"sub":"alice","app":"acme","iat":\#(Int(Self.now)),"exp":\#(Int(Self.now) + 604_800)}"#, "ok"),
            (#"{"sub":"alice","app":"acme","iat":\#(Int(Self.now)),"exp":\#(Int(Self.now) + 604_801)}"#, "invalid"),
            (#"{"sub":"alice","app":"acme","exp":\#(Int(Self.now) + 604_801)}"#, "invalid"),
        ]
        for (claims, expected) in cases {
            let outcome: String = switch verify(token(claims)) {
            case .success: "ok"
            case .failure(.invalid): "invalid"
            case .failure(.expired): "expired"
            }
            #expect(outcome == expected, "\(claims)")
        }
    }

    @Test("the form: three base64url parts, a JSON header with a supported alg and a kid, no crit; the key's alg and signature")
    func form() {
        let claims = #"{"sub":"alice","app":"acme","exp":\#(Int(Self.now) + 300)}"#
        let good = token(claims)
        #expect(UserToken.looksLikeJWT(good))
        #expect(!UserToken.looksLikeJWT("hk_0123_abcd"))
        for bad in [token(claims, header: #"{"alg":"none","kid":"tk_1"}"#), token(claims, header: #"{"alg":"HS384","kid":"tk_1"}"#),
                    token(claims, header: #"{"kid":"tk_1"}"#), token(claims, header: #"{"alg":"HS256"}"#),
                    token(claims, header: #"{"alg":"HS256","kid":"tk_1","crit":["b64"]}"#), token(claims, header: "[]"),
                    token(claims, secret: Array("another".utf8)), good + "x", String(good.dropLast()), good + ".",
                    "." + good, String(repeating: "a", count: 9000) + ".b.c"] {
            if case .success = verify(bad) { Issue.record("accepted \(bad.prefix(80))") }
        }
        let rsaKey = UserToken.Key(kid: "tk_1", app: "acme", algorithm: .rs256,
                                   material: .publicKey(PublicKey(pem: PrivateKey.rsa(bits: 2048)!.publicKeyPEM)!))
        #expect(verify(good, key: rsaKey) == .failure(.invalid("alg does not match the key's algorithm")))
    }

    @Test("RS256 and ES256 signatures verify with their public keys, and only with them")
    func signatures() throws {
        let message = Array("header.claims".utf8)
        for (algorithm, key, other) in [(SignatureAlgorithm.rs256, PrivateKey.rsa(bits: 2048)!, PrivateKey.rsa(bits: 2048)!),
                                        (.es256, PrivateKey.ec(curve: "P-256")!, PrivateKey.ec(curve: "P-256")!)] {
            let signature = try #require(key.sign(algorithm, message: message))
            if algorithm == .es256 { #expect(signature.count == 64) }
            let publicKey = try #require(PublicKey(pem: key.publicKeyPEM))
            #expect(publicKey.verify(algorithm, message: message, signature: signature))
            #expect(!publicKey.verify(algorithm, message: message + [0], signature: signature))
            #expect(!PublicKey(pem: other.publicKeyPEM)!.verify(algorithm, message: message, signature: signature))
            #expect(!publicKey.verify(algorithm == .rs256 ? .es256 : .rs256, message: message, signature: signature))
        }
        #expect(PublicKey(pem: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n") == nil)
        #expect(PublicKey(pem: PrivateKey.ec(curve: "P-384")!.publicKeyPEM)?.kind == .ec(curve: "secp384r1"))
        #expect(PublicKey(pem: PrivateKey.rsa(bits: 2048)!.publicKeyPEM)?.kind == .rsa(bits: 2048))
    }

    @Test("origins are scheme://host[:port], lower case, nothing after")
    func origins() {
        for good in ["https://app.example.com", "http://localhost:3000", "https://[::1]:8443", "http://10.0.0.1", "https://a-b.example"] {
            #expect(CORS.isOrigin(good), "\(good)")
        }
        for bad in ["*", "null", "https://App.example.com", "https://app.example.com/", "https://app.example.com/x", "ftp://a",
                    "https://", "https://a:0", "https://a:65536", "https://a:", "https://a..b", "https://.a", "https://a b",
                    "https://user@a", "https://a?x", "https://ä.example"] {
            #expect(!CORS.isOrigin(bad), "\(bad)")
        }
    }

    @Test("the token bucket: burst at once, then perSecond, each user apart; idle buckets swept")
    func bucket() {
        let limiter = UserRateLimiter(sweepAbove: 3)
        let limit = UserRateLimit(perSecond: 2, burst: 3)
        let start: UInt64 = 1_000_000_000
        #expect((0..<3).map { _ in limiter.take(app: "a", uid: "u", limit: limit, now: start) } == [nil, nil, nil])
        #expect(limiter.take(app: "a", uid: "u", limit: limit, now: start) == 1)
        #expect(limiter.take(app: "a", uid: "v", limit: limit, now: start) == nil)
        #expect(limiter.take(app: "b", uid: "u", limit: limit, now: start) == nil)
        // Half a second gives one token back.
        #expect(limiter.take(app: "a", uid: "u", limit: limit, now: start + 500_000_000) == nil)
        #expect(limiter.take(app: "a", uid: "u", limit: limit, now: start + 500_000_000) == 1)
        let slow = UserRateLimit(perSecond: 0.1, burst: 1)
        #expect(limiter.take(app: "c", uid: "u", limit: slow, now: start) == nil)
        #expect(limiter.take(app: "c", uid: "u", limit: slow, now: start) == 10)
        // Ten seconds later every other bucket is full again and may go; "c"/"u" is still down.
        #expect(limiter.take(app: "d", uid: "u", limit: limit, now: start + 10_000_000_000) == nil)
        #expect(limiter.take(app: "a", uid: "u", limit: limit, now: start + 10_000_000_000) == nil)
    }

    @Test("the bucket survives extreme rates, and the table stays bounded however many users come")
    func bucketBounds() {
        let limiter = UserRateLimiter(sweepAbove: 100, maxBuckets: 1000)
        // A rate below the minimum (only a stored value could carry one) is taken as the minimum:
        // no overflow, and Retry-After at most a day.
        let crawl = UserRateLimit(perSecond: 1e-12, burst: 1)
        #expect(limiter.take(app: "a", uid: "u", limit: crawl, now: 1) == nil)
        #expect(limiter.take(app: "a", uid: "u", limit: crawl, now: 1) == 1000)
        #expect(limiter.take(app: "a", uid: "v", limit: UserRateLimit(perSecond: 0.001, burst: 100_000), now: 1) == nil)
        // 50,000 users of a slow rate, an hour and a second apart each: the idle horizon lets the
        // sweeps drop them although their buckets never refill.
        let slow = UserRateLimit(perSecond: 0.001, burst: 100_000)
        for n in 0..<50_000 {
            _ = limiter.take(app: "b", uid: "u\(n)", limit: slow, now: UInt64(n) * 3_601_000_000_000)
        }
        #expect(limiter.count <= 200)
        // Many users at once: the table never holds more than maxBuckets.
        let burst = UserRateLimiter(sweepAbove: 100, maxBuckets: 1000)
        for n in 0..<5000 { _ = burst.take(app: "c", uid: "u\(n)", limit: slow, now: 1) }
        #expect(burst.count <= 1000)
    }
}
