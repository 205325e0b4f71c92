import FoundationEssentials
import HTTPTypes
import Secrets

/// Opaque cursors: a kind tag and fields, base64url-encoded. A cursor of another kind, or one
/// that does not decode, is `400 ERR_BAD_REQUEST` with `params.field = "cursor"`.
package enum Cursor {
    private static let separator: Character = "\u{1F}"

    /// With a `key`, the cursor carries an HMAC of its content, so one that was altered is refused.
    package static func encode(kind: String, _ fields: [String], key: [UInt8]? = nil) -> String {
        var text = ([kind] + fields).joined(separator: String(separator))
        if let key { text += String(separator) + signature(text, key: key) }
        return Data(text.utf8).base64EncodedString()
            .replacing("+", with: "-")
            .replacing("/", with: "_")
            .replacing("=", with: "")
    }

    package static func decode(kind: String, fieldCount: Int, _ cursor: String, key: [UInt8]? = nil) throws(HTTPError) -> [String] {
        let invalid = HTTPError.badRequest("cursor is not valid for this list", field: "cursor")
        var base64 = cursor.replacing("-", with: "+").replacing("_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { throw invalid }
        let text = String(decoding: data, as: UTF8.self)
        var parts = text.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
        if let key {
            guard parts.count == fieldCount + 2, let mac = parts.popLast(),
                  Secrets.constantTimeEqual(Array(mac.utf8), Array(signature(parts.joined(separator: String(separator)), key: key).utf8))
            else { throw invalid }
        }
        guard parts.count == fieldCount + 1, parts[0] == kind else { throw invalid }
        // Unsigned cursors are the client's to forge: a NUL could never be a position (PostgreSQL
        // text cannot hold one, so it could not even be compared with one).
        guard !parts.contains(where: { $0.utf8.contains(0) }) else { throw invalid }
        return Array(parts.dropFirst())
    }

    private static func signature(_ text: String, key: [UInt8]) -> String {
        Secrets.hex(Array(Secrets.hmacSHA256(key: key, message: Array(text.utf8)).prefix(12)))
    }
}
