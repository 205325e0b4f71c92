/// A Swift value that can be sent as a statement parameter, in PostgreSQL's text format.
///
/// Parameters are always sent separately from the SQL text (`$1`, `$2`, …), never spliced into it.
public protocol PostgresEncodable: Sendable {
    /// The value in PostgreSQL's text input format, or nil for SQL NULL.
    var postgresText: String? { get }
}

extension String: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { self }
}

extension Substring: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { String(self) }
}

extension Int: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { String(self) }
}

extension Int64: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { String(self) }
}

extension Int32: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { String(self) }
}

extension Double: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { String(self) }
}

extension Bool: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? { self ? "t" : "f" }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    /// The value as PostgreSQL text input.
    public var postgresText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.postgresText
        }
    }
}

/// A `bytea` parameter.
public struct PostgresBytes: PostgresEncodable, Hashable {
    /// The raw bytes.
    public var bytes: [UInt8]
    /// Bytes to send as `bytea`.
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    /// The value as PostgreSQL text input.
    public var postgresText: String? {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        out.reserveCapacity(2 + bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Array: PostgresEncodable where Element: PostgresEncodable {
    /// A one-dimensional array literal (`{"a","b",NULL}`), for `unnest($1::text[])` batches.
    public var postgresText: String? {
        // a closure, not `\.postgresText`: a key path through the generic `Element` is built
        // anew on every call (the runtime demangles its type: 2% of Herald's CPU in W5)
        postgresArrayLiteral(map { $0.postgresText })
    }
}

/// Builds the literal from concrete strings, as bytes: the generic, scalar-at-a-time version was
/// the largest cost of writing a large-group fan-out chunk (perf, W3 of make bench).
func postgresArrayLiteral(_ texts: [String?]) -> String {
    var out: [UInt8] = [UInt8(ascii: "{")]
    out.reserveCapacity(texts.count * 24 + 2)
    for (index, text) in texts.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        guard var text else {
            out.append(contentsOf: "NULL".utf8)
            continue
        }
        out.append(UInt8(ascii: "\""))
        text.withUTF8 { bytes in
            var start = 0
            for (offset, byte) in bytes.enumerated() where byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: bytes[start..<offset])
                out.append(UInt8(ascii: "\\"))
                start = offset
            }
            out.append(contentsOf: bytes[start...])
        }
        out.append(UInt8(ascii: "\""))
    }
    out.append(UInt8(ascii: "}"))
    return String(decoding: out, as: UTF8.self)
}
