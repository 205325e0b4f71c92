import HTTPTypes
import JSON
import Secrets

/// A user token (SPEC §15): a JWT in compact JWS form, `header.claims.signature`, each part
/// base64url. Parsing checks the form only; `verify` checks the signature against the key its
/// `kid` names and then the claims. Pure: the key and the time are given.
package struct UserToken: Sendable {
    /// The algorithms a token key may have; a token's `alg` must be its key's.
    package enum Algorithm: String, Sendable, CaseIterable {
        case hs256 = "HS256", rs256 = "RS256", es256 = "ES256"
    }

    /// The key a token is checked against, with what a key's row holds.
    package struct Key: Sendable {
        package enum Material: Sendable {
            /// HS256: the secret string's UTF-8 bytes.
            case secret([UInt8])
            /// RS256 or ES256.
            case publicKey(PublicKey)
        }

        package let kid: String
        package let app: String
        package let algorithm: Algorithm
        package let material: Material

        package init(kid: String, app: String, algorithm: Algorithm, material: Material) {
            self.kid = kid
            self.app = app
            self.algorithm = algorithm
            self.material = material
        }
    }

    /// Why a token was refused: `invalid` → `401 AUTH_ERR_TOKEN_INVALID`, `expired` (or not yet
    /// valid) → `401 AUTH_ERR_TOKEN_EXPIRED`. The reason is a sentence for the caller; it never
    /// holds key material.
    package enum Rejection: Error, Sendable, Equatable {
        case invalid(String)
        case expired(String)
    }

    /// What a verified token grants.
    package struct Grant: Sendable, Equatable {
        package let uid: String
        package let app: String
        package let kid: String
    }

    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    package static let leewaySeconds: Double = 60
    /// The longest life a token may claim: `exp` at most this long after `iat` (or now).
    package static let maxLifetimeSeconds: Double = 7 * 24 * 3600
    /// Longer texts are refused before any decoding.
    package static let maxLength = 8192

    /// The header's `kid`, naming the key.
    package let kid: String
    /// The header's `alg`, as written.
    package let algorithm: String
    package let signingInput: [UInt8]
    package let signature: [UInt8]
    package let claims: [String: JSONValue]

    /// Whether a bearer token has the form of a JWS (three parts): such a token is checked as a
    /// user token, anything else as an API key.
    package static func looksLikeJWT(_ token: String) -> Bool {
        token.utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count == 2
    }

    /// Splits and decodes a compact JWS; any deviation from its form is `invalid`.
    package static func parse(_ token: String) throws(Rejection) -> UserToken {
        let bytes = Array(token.utf8)
        guard bytes.count <= maxLength else { throw .invalid("the token is longer than \(maxLength) bytes") }
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty, !parts[2].isEmpty else {
            throw .invalid("the token is not a compact JWS (header.claims.signature)")
        }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]) else {
            throw .invalid("a part of the token is not base64url without padding")
        }
        guard case .object(let header)? = try? JSONParser.parse(headerBytes, maxDepth: 8) else {
            throw .invalid("the token's header is not a JSON object")
        }
        guard case .object(let claims)? = try? JSONParser.parse(claimBytes, maxDepth: 16) else {
            throw .invalid("the token's claims are not a JSON object")
        }
        guard case .string(let algorithm)? = header["alg"] else { throw .invalid("the token's header has no alg") }
        guard Algorithm(rawValue: algorithm) != nil else {
            throw .invalid("alg must be HS256, RS256 or ES256")
        }
        guard case .string(let kid)? = header["kid"], !kid.isEmpty else { throw .invalid("the token's header has no kid") }
        // Looked up in the database next: a kid that no key could have (a NUL, which libpq
        // cannot even send, or another control character) is refused here, as an unknown one is.
        guard Identifier.isValid(kid) else { throw .invalid("the token's kid is not a key id") }
        // Extensions the token says must be understood: Herald understands none (RFC 7515 §4.1.11).
        guard header["crit"] == nil else { throw .invalid("the token's header has crit, which Herald does not support") }
        return UserToken(kid: kid, algorithm: algorithm, signingInput: Array(parts[0]) + [UInt8(ascii: ".")] + Array(parts[1]),
                         signature: signature, claims: claims)
    }

    /// Checks the signature with `key`, then the claims at time `now` (epoch seconds).
    package func verify(with key: Key, now: Double) throws(Rejection) -> Grant {
        guard algorithm == key.algorithm.rawValue else { throw .invalid("alg does not match the key's algorithm") }
        let signed: Bool
        switch key.material {
        case .secret(let secret):
            signed = signature.count == 32
                && Secrets.constantTimeEqual(Secrets.hmacSHA256(key: secret, message: signingInput), signature)
        case .publicKey(let publicKey):
            signed = publicKey.verify(key.algorithm == .rs256 ? .rs256 : .es256, message: signingInput, signature: signature)
        }
        guard signed else { throw .invalid("the token's signature does not verify") }

        guard case .string(let app)? = claims["app"], app == key.app else { throw .invalid("app is not the key's app") }
        guard case .string(let uid)? = claims["sub"] else { throw .invalid("the token has no sub") }
        guard Identifier.isValid(uid) else { throw .invalid("sub is not a valid uid") }
        guard let exp = try Self.numericDate(claims["exp"], name: "exp") else { throw .invalid("the token has no exp") }
        let iat = try Self.numericDate(claims["iat"], name: "iat")
        let nbf = try Self.numericDate(claims["nbf"], name: "nbf")
        if let audience = claims["aud"] {
            switch audience {
            case .string(let name) where name == "herald":
                break
            case .array(let names) where names.contains(.string("herald")) && names.allSatisfy({ if case .string = $0 { true } else { false } }):
                break
            default:
                throw .invalid("aud does not contain herald")
            }
        }
        guard exp - (iat ?? now) <= Self.maxLifetimeSeconds else {
            throw .invalid("exp is more than 7 days after \(iat == nil ? "now" : "iat")")
        }
        if now > exp + Self.leewaySeconds { throw .expired("the token expired") }
        if let nbf, nbf > now + Self.leewaySeconds { throw .expired("the token is not valid yet (nbf)") }
        if let iat, iat > now + Self.leewaySeconds { throw .expired("the token is not valid yet (iat)") }
        return Grant(uid: uid, app: app, kid: key.kid)
    }

    /// A NumericDate claim (RFC 7519 §2): a JSON number of seconds; nil when absent.
    private static func numericDate(_ value: JSONValue?, name: String) throws(Rejection) -> Double? {
        switch value {
        case nil: return nil
        case .int(let seconds)?: return Double(seconds)
        case .double(let seconds)? where seconds.isFinite: return seconds
        default: throw .invalid("\(name) must be a number of seconds")
        }
    }
}
