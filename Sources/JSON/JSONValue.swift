/// A JSON value, for the free-form parts of responses such as an error's `params`.
///
/// A number read from JSON is `.int` when its value is a whole number that `Int` holds (`3.0` and
/// `1e3` included: JSON Schema counts them as integers, and so does every check for `.int`), else
/// `.double`.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case int(Int)
    /// An integer written without fraction or exponent that `Int` cannot hold, as its decimal
    /// text (SPEC §1: a JSON integer id means its decimal string, however long).
    case bigInteger(String)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Any JSON value, through `Decodable`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// The value as JSON, through `Encodable`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .bigInteger(let digits): try container.encode(Double(digits) ?? 0)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral {
    /// A string literal is `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal is `.int`.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// A boolean literal is `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

extension JSONValue {
    /// The value of a JSON number written with a fraction or an exponent: `.int` when it is a
    /// whole number that `Int` holds, else `.double`. Given `text` (the number as written) without
    /// an exponent, the decision is exact (`123.000` is an integer, `1.0000000000000001` is not);
    /// otherwise it is made on the parsed `Double` (as a JSON Schema validator does), up to 2^53.
    public static func number(_ value: Double, text: String? = nil) -> JSONValue {
        if let text, !text.contains(where: { $0 == "e" || $0 == "E" }), let point = text.firstIndex(of: ".") {
            guard text[text.index(after: point)...].allSatisfy({ $0 == "0" }), let whole = Int(text[..<point]) else {
                return .double(value)
            }
            return .int(whole)
        }
        guard value.isFinite, value == value.rounded(.towardZero), abs(value) <= 9_007_199_254_740_992 else {
            return .double(value)
        }
        return .int(Int(value))
    }
}
