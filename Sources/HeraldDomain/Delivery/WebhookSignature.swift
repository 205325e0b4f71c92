import FoundationEssentials
import Secrets

/// Standard Webhooks signing (https://www.standardwebhooks.com): the signed content is
/// `<webhook-id>.<webhook-timestamp>.<body>`, its HMAC-SHA256 under the secret's bytes (the base64
/// after `whsec_`), sent as `v1,<base64>`; several live secrets give several signatures,
/// space-separated.
package struct WebhookSecret: Sendable, Equatable {
    package static let prefix = "whsec_"
    package let text: String
    package let key: [UInt8]

    /// A secret as stored or shown (`whsec_…`); nil when it is not one.
    package init?(_ text: String) {
        guard text.hasPrefix(Self.prefix), let key = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))), !key.isEmpty else {
            return nil
        }
        self.text = text
        self.key = Array(key)
    }

    /// A new secret: 32 random bytes.
    package static func generate() -> WebhookSecret {
        WebhookSecret(Self.prefix + Data(Secrets.randomBytes(32)).base64EncodedString())!
    }

    /// `v1,<base64 HMAC-SHA256 of id.timestamp.body>`.
    package func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var content = Array("\(id).\(timestamp).".utf8)
        content.append(contentsOf: body)
        return "v1," + Data(Secrets.hmacSHA256(key: key, message: content)).base64EncodedString()
    }

    /// The `webhook-signature` header: one signature per live secret, newest first.
    package static func header(secrets: [WebhookSecret], id: String, timestamp: Int64, body: [UInt8]) -> String {
        secrets.map { $0.signature(id: id, timestamp: timestamp, body: body) }.joined(separator: " ")
    }
}
