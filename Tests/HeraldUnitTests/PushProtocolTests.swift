@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import JSON
import Secrets
import Testing

/// SPEC §13.4's cryptography, without I/O: Web Push encryption against a known answer made by
/// `http_ece` (an implementation Herald did not write), and the provider tokens' form and
/// signatures.
@Suite("Push protocols")
struct PushProtocolTests {
    // Made with Python's http_ece 1.2.1 (`http_ece.encrypt(…, version="aes128gcm", rs=4096)`) from
    // these fixed keys, auth secret and salt.
    static let receiverPoint = "BFFcPW6545a5BNP-yn9U_c0MwemXvzddylFa0KbDtANfRTa-OlDzGPv5pUdZAqIhUCvvDVfgjFOyzApW8X2fk1Q"
    static let auth = "ZGVmZ2hpamtsbW5vcHFycw"
    static let salt = "yMnKy8zNzs_Q0dLT1NXW1w"
    static let senderPEM = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgISIjJCUmJygpKiss\nLS4vMDEyMzQ1Njc4OTo7PD0+P0ChRANCAAQfFAFGv7GyUfhPTdvg1M3P13r9mEqV\nIONXlAIfgxK7nuyZWgix+ncE3z3MC1CpZlJj+3cR+V+fikScUJbkfIkr\n-----END PRIVATE KEY-----\n"
    static let receiverPEM = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgAQIDBAUGBwgJCgsM\nDQ4PEBESExQVFhcYGRobHB0eHyChRANCAARRXD1uueOWuQTT/sp/VP3NDMHpl783\nXcpRWtCmw7QDX0U2vjpQ8xj7+aVHWQKiIVAr7w1X4IxTsswKVvF9n5NU\n-----END PRIVATE KEY-----\n"
    static let plaintext = #"{"kind":"reply","text":"When I grow up, I want to be a watermelon"}"#
    static let body = "yMnKy8zNzs_Q0dLT1NXW1wAAEABBBB8UAUa_sbJR-E9N2-DUzc_Xev2YSpUg41eUAh-DErue7JlaCLH6dwTfPcwLUKlmUmP7dxH5X5-KRJxQluR8iSu_JRwVsZOHb9PH7j3HwHWk8QW_1yQX1W7frhzDeIDGTV2rM2x0x1UM5bqMIuxWkJqBfPBoNJrztts7tgBF1bskVUB-TsLS-G5U3SkRsnaxHxnL2gw"

    static func bytes(_ text: String) -> [UInt8] { Base64URL.decode(Array(text.utf8))! }

    @Test("Web Push's aes128gcm body is byte for byte what http_ece makes from the same keys and salt")
    func knownAnswer() throws {
        let sender = try #require(PrivateKey.pem(Self.senderPEM))
        let subscription = WebPushEncryption.Subscription(publicPoint: Self.bytes(Self.receiverPoint), authSecret: Self.bytes(Self.auth))
        let body = try #require(WebPushEncryption.encrypt(Array(Self.plaintext.utf8), for: subscription, ephemeral: sender,
                                                          salt: Self.bytes(Self.salt)))
        #expect(Base64URL.encode(body) == Self.body)
        // the receiver's key reads back as the point its subscription gives
        #expect(PrivateKey.pem(Self.receiverPEM)?.p256PublicPoint == Self.bytes(Self.receiverPoint))
    }

    @Test("a fresh message: a new ephemeral key and salt each time, and the receiver can open it")
    func roundTrip() throws {
        let receiver = try #require(PrivateKey.ec(curve: "P-256"))
        let point = try #require(receiver.p256PublicPoint)
        #expect(point.count == 65 && point[0] == 4)
        let subscription = WebPushEncryption.Subscription(publicPoint: point, authSecret: Secrets.randomBytes(16))
        let message = Array("{\"kind\":\"digest\"}".utf8)
        let first = try #require(WebPushEncryption.encrypt(message, for: subscription))
        let second = try #require(WebPushEncryption.encrypt(message, for: subscription))
        #expect(first != second && Array(first.prefix(16)) != Array(second.prefix(16)))
        let opened = try #require(Self.open(first, receiver: receiver, authSecret: subscription.authSecret))
        #expect(opened == message + [2])
        var tampered = first
        tampered[tampered.count - 1] ^= 1
        #expect(Self.open(tampered, receiver: receiver, authSecret: subscription.authSecret) == nil)
        // not a point of the curve, or a wrong auth secret size: nothing
        #expect(WebPushEncryption.encrypt(message, for: .init(publicPoint: [4] + Array(repeating: 1, count: 64), authSecret: Secrets.randomBytes(16))) == nil)
        #expect(WebPushEncryption.encrypt(message, for: .init(publicPoint: point, authSecret: [1, 2])) == nil)
    }

    /// RFC 8291 §3.4 from the receiver's side: the plaintext of an `aes128gcm` body with its
    /// padding delimiter, or nil when it does not open.
    static func open(_ body: [UInt8], receiver: PrivateKey, authSecret: [UInt8]) -> [UInt8]? {
        guard body.count > 21, let point = receiver.p256PublicPoint else { return nil }
        let salt = Array(body[0..<16]), length = Int(body[20])
        guard body.count > 21 + length, let sender = PublicKey.p256(point: Array(body[21..<(21 + length)])),
              let shared = receiver.sharedSecret(with: sender) else { return nil }
        let ikm = Secrets.hkdfSHA256(salt: authSecret, inputKey: shared,
                                     info: Array("WebPush: info".utf8) + [0] + point + Array(body[21..<(21 + length)]), length: 32)
        let cek = Secrets.hkdfSHA256(salt: salt, inputKey: ikm, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = Secrets.hkdfSHA256(salt: salt, inputKey: ikm, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        return Secrets.aes128GCMOpen(key: cek, nonce: nonce, sealed: Array(body[(21 + length)...]))
    }

    @Test("HKDF-SHA256 matches RFC 5869's test case 1")
    func hkdf() {
        let okm = Secrets.hkdfSHA256(salt: Secrets.unhex("000102030405060708090a0b0c")!, inputKey: Array(repeating: 0x0b, count: 22),
                                     info: Secrets.unhex("f0f1f2f3f4f5f6f7f8f9")!, length: 42)
        #expect(Secrets.hex(okm) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    /// The header and claims of a compact JWS, and whether `key` verifies its signature.
    func parts(_ token: String, verifiedBy key: PublicKey, _ algorithm: SignatureAlgorithm) throws -> (header: JSONValue, claims: JSONValue, valid: Bool) {
        let pieces = token.split(separator: ".").map(String.init)
        try #require(pieces.count == 3)
        let header = try JSONParser.parse(Self.bytes(pieces[0])), claims = try JSONParser.parse(Self.bytes(pieces[1]))
        let valid = key.verify(algorithm, message: Array((pieces[0] + "." + pieces[1]).utf8), signature: Self.bytes(pieces[2]))
        return (header, claims, valid)
    }

    @Test("provider tokens: APNs ES256 with kid and iss/iat, FCM's RS256 assertion, VAPID for the endpoint's origin")
    func tokens() throws {
        let ec = try #require(PrivateKey.ec(curve: "P-256"))
        let ecPublic = try #require(PublicKey(pem: ec.publicKeyPEM))
        // a .p8 key comes as PKCS#8 PEM: written and read back, it still signs for the same public key
        let p8 = try #require(PrivateKey.pem(ec.pkcs8PEM))
        let apns = try #require(SignedToken.apns(key: p8, keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_700_000_000))
        let a = try parts(apns, verifiedBy: ecPublic, .es256)
        #expect(a.valid && a.header["alg"] == "ES256" && a.header["kid"] == "ABC123DEFG")
        #expect(a.claims["iss"] == "DEF123GHIJ" && a.claims["iat"] == .int(1_700_000_000))

        let rsa = try #require(PrivateKey.rsa(bits: 2048))
        let serviceKey = try #require(PrivateKey.pem(rsa.pkcs8PEM))
        let assertion = try #require(SignedToken.fcmAssertion(key: serviceKey, clientEmail: "push@example.iam.gserviceaccount.com",
                                                              tokenURI: "https://oauth2.googleapis.com/token", issuedAt: 1_700_000_000))
        let rsaPublic = try #require(PublicKey(pem: rsa.publicKeyPEM))
        let f = try parts(assertion, verifiedBy: rsaPublic, .rs256)
        #expect(f.valid && f.header["alg"] == "RS256")
        #expect(f.claims["scope"] == "https://www.googleapis.com/auth/firebase.messaging" && f.claims["aud"] == "https://oauth2.googleapis.com/token")
        #expect(f.claims["exp"] == .int(1_700_003_600) && f.claims["iss"] == "push@example.iam.gserviceaccount.com")

        let vapid = try #require(SignedToken.vapid(key: ec, audience: "https://push.example.net", subject: "mailto:ops@example.com",
                                                   issuedAt: 1_700_000_000))
        let point = try #require(ec.p256PublicPoint)
        #expect(vapid.hasPrefix("vapid t=") && vapid.hasSuffix(", k=" + Base64URL.encode(point)))
        let token = String(vapid.dropFirst("vapid t=".count).prefix { $0 != "," })
        let v = try parts(token, verifiedBy: ecPublic, .es256)
        #expect(v.valid && v.claims["aud"] == "https://push.example.net" && v.claims["sub"] == "mailto:ops@example.com")
        #expect(v.claims["exp"] == .int(1_700_000_000 + 12 * 3600))
        #expect(PrivateKey.pem("not a key") == nil && PrivateKey.pem(ec.publicKeyPEM) == nil)
    }

    @Test("a browser key that is not a point of P-256 is refused at import (the ECDH relies on it and skips OpenSSL's second check)")
    func offCurvePointRefused() throws {
        let key = try #require(PrivateKey.ec(curve: "P-256"))
        let point = try #require(key.p256PublicPoint)
        #expect(PublicKey.p256(point: point) != nil)
        var moved = point
        moved[64] ^= 1   // y changed: (x, y') is not on the curve
        #expect(PublicKey.p256(point: moved) == nil)
        #expect(PublicKey.p256(point: [4] + [UInt8](repeating: 0, count: 64)) == nil, "(0, 0) is not on the curve")
        #expect(PublicKey.p256(point: Array(point.prefix(33))) == nil, "compressed or short points are not a browser's p256dh")
        let other = try #require(PrivateKey.ec(curve: "P-256"))
        let peer = try #require(PublicKey.p256(point: point))
        let otherPoint = try #require(other.p256PublicPoint)
        let otherPeer = try #require(PublicKey.p256(point: otherPoint))
        #expect(other.sharedSecret(with: peer) == key.sharedSecret(with: otherPeer), "ECDH agrees both ways")
    }
}
