import Secrets

/// An app key's text: `hk_<id>_<secret>`.
///
/// The id (64 random bits, hex) is public and finds the row; the secret (256 random bits, hex)
/// is shown once and only its SHA-256 is stored, compared in constant time.
package struct APIKey: Sendable, Equatable {
    package let id: String
    package let secret: String

    package static let prefix = "hk_"

    /// A new random key.
    package static func generate() -> APIKey {
        APIKey(id: Secrets.hex(Secrets.randomBytes(8)), secret: Secrets.hex(Secrets.randomBytes(32)))
    }

    /// The full token a client sends as `Authorization: Bearer …`.
    package var token: String { Self.prefix + id + "_" + secret }

    /// The stored digest of the secret.
    package var secretHash: [UInt8] { Secrets.sha256(secret) }

    /// Splits a token into id and secret; nil when it does not have the key's shape.
    package static func parse(_ token: String) -> APIKey? {
        guard token.hasPrefix(prefix) else { return nil }
        let rest = token.dropFirst(prefix.count)
        let parts = rest.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 16, parts[1].count == 64,
              Secrets.unhex(String(parts[0])) != nil, Secrets.unhex(String(parts[1])) != nil else { return nil }
        return APIKey(id: String(parts[0]), secret: String(parts[1]))
    }

    /// Whether this key's secret matches a stored digest, in constant time.
    package func matches(secretHash stored: [UInt8]) -> Bool {
        Secrets.constantTimeEqual(secretHash, stored)
    }
}

/// The admin token, kept only as its digest and compared in constant time.
package struct AdminToken: Sendable {
    private let digest: [UInt8]

    package init(_ token: String) {
        digest = Secrets.sha256(token)
    }

    package func matches(_ candidate: String) -> Bool {
        Secrets.constantTimeEqual(Secrets.sha256(candidate), digest)
    }
}
