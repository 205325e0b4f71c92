import HTTPTypes

/// The rule for every opaque id on the wire (uid, guid, message id, app id): 1–128 characters,
/// no control characters, no `/` (SPEC §1). Characters are counted as Unicode scalars, and the
/// UTF-8 form is capped at 512 bytes, so that no id can outgrow an index entry.
package enum Identifier {
    package static func isValid(_ text: String) -> Bool {
        let count = text.unicodeScalars.count
        guard count >= 1, count <= 128, text.utf8.count <= 512 else { return false }
        return !text.unicodeScalars.contains { scalar in
            scalar == "/" || scalar.value < 0x20 || (scalar.value >= 0x7f && scalar.value < 0xa0)
        }
    }

    /// A conversation id (SPEC §1): `group_<guid>` or `<uid>_user_<uid>`, so up to 262 characters.
    package static func validateConversation(_ text: String, field: String) throws(HTTPError) -> String {
        let count = text.unicodeScalars.count
        guard count >= 1, count <= 262, text.utf8.count <= 1036,
              !text.unicodeScalars.contains(where: { $0 == "/" || $0.value < 0x20 || ($0.value >= 0x7f && $0.value < 0xa0) }) else {
            throw HTTPError.badRequest("\(field) must be 1-262 characters without control characters or '/'", field: field)
        }
        return text
    }

    /// Returns `text` when valid, else throws 400 naming `field`.
    package static func validate(_ text: String, field: String) throws(HTTPError) -> String {
        guard isValid(text) else {
            throw HTTPError.badRequest("\(field) must be 1-128 characters without control characters or '/'", field: field)
        }
        return text
    }
}
