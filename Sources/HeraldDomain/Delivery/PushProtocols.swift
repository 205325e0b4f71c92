import JSON
import Secrets

/// The message formats of direct delivery (SPEC §13.4) that need cryptography, with no I/O:
/// Web Push's payload encryption (RFC 8291 over RFC 8188's `aes128gcm`), VAPID (RFC 8292), APNs
/// provider tokens and the FCM service account's JWT bearer assertion (RFC 7523). Each is checked
/// against independent implementations (`http_ece`, PyJWT) by the tests.
package enum WebPushEncryption {
    /// A browser's PushSubscription keys: its P-256 public point and its 16-byte auth secret.
    package struct Subscription {
        package let publicPoint: [UInt8]
        package let authSecret: [UInt8]
        /// `publicPoint` as a key, when it was already imported (reading the token checks it).
        package let publicKey: PublicKey?

        package init(publicPoint: [UInt8], authSecret: [UInt8], publicKey: PublicKey? = nil) {
            self.publicPoint = publicPoint
            self.authSecret = authSecret
            self.publicKey = publicKey
        }
    }

    /// RFC 8188's record size written in the header: one record holds the whole payload.
    package static let recordSize = 4096

    /// The `aes128gcm` body of `plaintext` for `subscription` (RFC 8291 §3.4): the header (salt,
    /// record size, the sender's ephemeral public point as key id), then one record — the
    /// plaintext, the last-record delimiter 0x02, sealed with AES-128-GCM. `ephemeral` and
    /// `salt` are fresh for each message; tests pass them to compare with a known answer.
    package static func encrypt(_ plaintext: [UInt8], for subscription: Subscription, ephemeral: PrivateKey? = nil,
                        salt: [UInt8]? = nil) -> [UInt8]? {
        // a new key pair per message (RFC 8291 §2); tests pass a known one
        let pair: (key: PrivateKey, point: [UInt8])? = if let ephemeral { ephemeral.p256PublicPoint.map { (ephemeral, $0) } }
                                                       else { PrivateKey.p256() }
        guard subscription.authSecret.count == 16,
              let receiver = subscription.publicKey ?? PublicKey.p256(point: subscription.publicPoint),
              let (sender, senderPoint) = pair,
              let shared = sender.sharedSecret(with: receiver) else { return nil }
        let salt = salt ?? Secrets.randomBytes(16)
        guard salt.count == 16 else { return nil }
        // RFC 8291 §3.3: the input keying material from the ECDH secret and the auth secret
        let keyInfo = Array("WebPush: info".utf8) + [0] + subscription.publicPoint + senderPoint
        let ikm = Secrets.hkdfSHA256(salt: subscription.authSecret, inputKey: shared, info: keyInfo, length: 32)
        // RFC 8188 §2.2-2.3: the content-encryption key and the nonce
        let prk = Secrets.hmacSHA256(key: salt, message: ikm)   // HKDF-Extract, shared by both
        let cek = Secrets.hkdfExpandSHA256(prk: prk, info: Array("Content-Encoding: aes128gcm".utf8) + [0], length: 16)
        let nonce = Secrets.hkdfExpandSHA256(prk: prk, info: Array("Content-Encoding: nonce".utf8) + [0], length: 12)
        let size = max(recordSize, plaintext.count + 1 + 16)
        guard let sealed = Secrets.aes128GCMSeal(key: cek, nonce: nonce, plaintext: plaintext + [2]) else { return nil }
        let header = salt + [UInt8(size >> 24 & 0xff), UInt8(size >> 16 & 0xff), UInt8(size >> 8 & 0xff), UInt8(size & 0xff)]
            + [UInt8(senderPoint.count)] + senderPoint
        return header + sealed
    }
}

/// Compact JWS tokens (RFC 7515) signed with a private key: the provider tokens of direct delivery.
package enum SignedToken {
    /// `header.claims.signature`, each part base64url of its JSON (the signature's bytes for the last).
    package static func make(_ algorithm: SignatureAlgorithm, key: PrivateKey, header: [(String, JSONValue)],
                     claims: [(String, JSONValue)]) -> String? {
        func object(_ fields: [(String, JSONValue)]) -> String {
            var writer = JSONWriter()
            writer.object { object in for (name, value) in fields { object.field(name, value) } }
            return Base64URL.encode(writer.bytes)
        }
        let input = object(header) + "." + object(claims)
        guard let signature = key.sign(algorithm, message: Array(input.utf8)) else { return nil }
        return input + "." + Base64URL.encode(signature)
    }

    /// An APNs provider token (SPEC §13.4): ES256 with the `.p8` key, `kid` the key id, `iss`
    /// the team id, `iat` now in seconds.
    package static func apns(key: PrivateKey, keyID: String, teamID: String, issuedAt: Int64) -> String? {
        make(.es256, key: key, header: [("alg", "ES256"), ("kid", .string(keyID))],
             claims: [("iss", .string(teamID)), ("iat", .int(Int(issuedAt)))])
    }

    /// The RS256 assertion of Google's JWT bearer grant (RFC 7523) for FCM: valid one hour.
    package static func fcmAssertion(key: PrivateKey, clientEmail: String, tokenURI: String, issuedAt: Int64) -> String? {
        make(.rs256, key: key, header: [("alg", "RS256"), ("typ", "JWT")],
             claims: [("iss", .string(clientEmail)), ("scope", "https://www.googleapis.com/auth/firebase.messaging"),
                      ("aud", .string(tokenURI)), ("iat", .int(Int(issuedAt))), ("exp", .int(Int(issuedAt) + 3600))])
    }

    /// The `Authorization` header of a Web Push request (RFC 8292 §3): `vapid t=<ES256 JWT for
    /// the endpoint's origin, valid 12 hours>, k=<the app's public point>`.
    package static let vapidLifetimeSeconds: Int64 = 12 * 3600

    package static func vapid(key: PrivateKey, audience: String, subject: String, issuedAt: Int64) -> String? {
        guard let point = key.p256PublicPoint,
              let token = make(.es256, key: key, header: [("typ", "JWT"), ("alg", "ES256")],
                               claims: [("aud", .string(audience)), ("exp", .int(Int(issuedAt + vapidLifetimeSeconds))),
                                        ("sub", .string(subject))])
        else { return nil }
        return "vapid t=\(token), k=\(Base64URL.encode(point))"
    }
}

extension WebPushEncryption {
    /// A `webpush` device's token: the browser's PushSubscription as JSON text. Nil when it is not
    /// one (an `https` endpoint, a P-256 `p256dh`, a 16-byte `auth`).
    package static func subscription(token: String) -> (endpoint: String, keys: WebPushEncryption.Subscription)? {
        guard case .object(let object)? = try? JSONParser.parse(Array(token.utf8)), case .string(let endpoint)? = object["endpoint"],
              endpoint.lowercased().hasPrefix("https://"), DeliverySettings.isValidURL(endpoint),
              case .object(let keys)? = object["keys"], case .string(let p256dh)? = keys["p256dh"], case .string(let auth)? = keys["auth"],
              let point = Base64URL.decode(Array(p256dh.utf8)) ?? Base64URL.decode(Array(p256dh.replacingPadding.utf8)),
              let secret = Base64URL.decode(Array(auth.utf8)) ?? Base64URL.decode(Array(auth.replacingPadding.utf8)),
              secret.count == 16, let key = PublicKey.p256(point: point) else { return nil }
        return (endpoint, .init(publicPoint: point, authSecret: secret, publicKey: key))
    }
}

private extension String {
    /// base64url text some browsers send with `=` padding, without it.
    var replacingPadding: String { String(self.prefix { $0 != "=" }) }
}
