/// A Swift value that can be sent as a statement parameter, in PostgreSQL's text format.
///
/// Parameters are always sent separately from the SQL text (`$1`, `$2`, …), never spliced into it.
public protocol PostgresEncodable: Sendable {
    /// The value in PostgreSQL's text input format, or nil for SQL NULL.
    var postgresText: String? { get }
}

extension String: PostgresEncodable {
    public var postgresText: String? { self }
}

extension Substring: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Int: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Int64: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Int32: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Double: PostgresEncodable {
    public var postgresText: String? { String(self) }
}

extension Bool: PostgresEncodable {
    public var postgresText: String? { self ? "t" : "f" }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresText: String? {
        switch self {
        case .none: return nil
        case .some(let value): return value.postgresText
        }
    }
}

/// A `bytea` parameter.
public struct PostgresBytes: PostgresEncodable, Hashable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
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
        var out = "{"
        for (index, element) in enumerated() {
            if index > 0 { out += "," }
            guard let text = element.postgresText else {
                out += "NULL"
                continue
            }
            out += "\""
            for character in text.unicodeScalars {
                if character == "\"" || character == "\\" { out += "\\" }
                out.unicodeScalars.append(character)
            }
            out += "\""
        }
        return out + "}"
    }
}
