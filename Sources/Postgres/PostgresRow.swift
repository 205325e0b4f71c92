/// The rows a statement returned, copied out of libpq: a plain `Sendable` value.
public struct PostgresRows: Sendable, RandomAccessCollection {
    /// Column names in order.
    public let columns: [String]
    /// Each column name's position (the first, if a name repeats), built once per result.
    let positions: [String: Int]
    let storage: [[String?]]
    /// The count of rows the statement affected (`INSERT`/`UPDATE`/`DELETE`), 0 for others.
    public let affectedRows: Int

    init(columns: [String], rows: [[String?]], affectedRows: Int) {
        self.columns = columns
        var positions: [String: Int] = [:]
        for (index, name) in columns.enumerated() where positions[name] == nil { positions[name] = index }
        self.positions = positions
        self.storage = rows
        self.affectedRows = affectedRows
    }

    /// `RandomAccessCollection`: rows from 0.
    public var startIndex: Int { 0 }
    /// `RandomAccessCollection`: the row count.
    public var endIndex: Int { storage.count }
    /// The row at `position`.
    public subscript(position: Int) -> PostgresRow {
        PostgresRow(columns: columns, positions: positions, values: storage[position])
    }
}

/// One row: text-format values with typed access by position or by column name.
public struct PostgresRow: Sendable {
    /// Column names in order.
    public let columns: [String]
    @usableFromInline let positions: [String: Int]
    /// The raw text values, nil for SQL NULL.
    public let values: [String?]

    /// The value at `index` as `T`; throws `PostgresError.decoding` if it does not parse.
    /// Inlinable, like the conformances below, so that a caller's `decode(…, as: Int64?.self)`
    /// is specialised where it is called: the generic form looked up `Optional<T>`'s metadata
    /// in the Swift runtime at every call, a tenth of Herald's time in routing (S2's `perf`).
    @inlinable
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard index >= 0, index < values.count else { throw Self.outOfRange(index) }
        guard let value = T.decode(postgresText: values[index]) else { throw notA(T.self, at: index) }
        return value
    }

    @usableFromInline
    static func outOfRange(_ index: Int) -> PostgresError {
        PostgresError(code: .decoding, message: "column index \(index) out of range")
    }

    @usableFromInline
    func notA(_ type: Any.Type, at index: Int) -> PostgresError {
        PostgresError(code: .decoding, message: "column \(columns[index]) is not a \(type): \(values[index] == nil ? "NULL" : "unparseable")")
    }

    /// The value of the column named `name` as `T` (a hash lookup: as cheap as by position, and
    /// a reordered SELECT cannot shift fields). Name computed columns with `AS`.
    @inlinable
    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let index = positions[name] else { throw Self.noColumn(name) }
        return try decode(index, as: type)
    }

    /// The value of the column named `name` as `T`, or nil when the statement selected no such
    /// column or it is NULL: for record types read by statements that select more or fewer of
    /// their table's columns.
    @inlinable
    public func decodeIfPresent<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T? {
        guard let index = positions[name] else { return nil }
        return try decode(index, as: T?.self)
    }

    @usableFromInline
    static func noColumn(_ name: String) -> PostgresError {
        PostgresError(code: .decoding, message: "no column named \(name)")
    }
}

/// A Swift type that can be read from a value in PostgreSQL's text output format.
public protocol PostgresDecodable: Sendable {
    /// The value, or nil when the text (nil for SQL NULL) does not represent one.
    static func decode(postgresText: String?) -> Self?
}

extension String: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> String? { postgresText }
}

extension Int: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> Int? { postgresText.flatMap { Int($0) } }
}

extension Int64: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> Int64? { postgresText.flatMap { Int64($0) } }
}

extension Double: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> Double? { postgresText.flatMap { Double($0) } }
}

extension Bool: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> Bool? {
        switch postgresText {
        case "t", "true": return true
        case "f", "false": return false
        default: return nil
        }
    }
}

extension PostgresBytes: PostgresDecodable {
    /// Reads `bytea` in the default hex output format (`\x0a1b…`).
    public static func decode(postgresText: String?) -> PostgresBytes? {
        guard let text = postgresText else { return nil }
        let chars = Array(text.utf8)
        guard chars.count >= 2, chars[0] == UInt8(ascii: "\\"), chars[1] == UInt8(ascii: "x"),
              chars.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var bytes = [UInt8]()
        bytes.reserveCapacity((chars.count - 2) / 2)
        var index = 2
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return PostgresBytes(bytes)
    }
}

/// SQL NULL reads as nil; any other value must parse as `Wrapped`.
extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    /// Parsed from PostgreSQL's text output; nil if it does not parse.
    @inlinable
    public static func decode(postgresText: String?) -> Wrapped?? {
        guard let text = postgresText else { return .some(nil) }
        guard let value = Wrapped.decode(postgresText: text) else { return nil }
        return .some(value)
    }
}
