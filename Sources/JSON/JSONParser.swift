/// A strict JSON (RFC 8259) parser from UTF-8 bytes to `JSONValue`.
///
/// Faster than going through `Decodable` for free-form input (the ingest path validates every
/// field by hand, to name the exact path of a bad one), and it keeps integers apart from
/// fractions: a number is `.int` when its value is whole (`3`, but also `3.0` and `3e2`, which
/// JSON Schema calls integers too), `.double` otherwise. Nesting is limited to `maxDepth` so
/// hostile input cannot exhaust the stack.
public struct JSONParser {
    /// Why a text is not (acceptable) JSON, and where.
    public struct SyntaxError: Error, Sendable, Equatable {
        /// The byte offset of the problem.
        public let offset: Int
        /// What is wrong there.
        public let message: String
        /// The key, for a key given twice in one object.
        public var field: String? = nil
    }

    /// The deepest nesting accepted by default.
    public static let maxDepth = 128

    private let bytes: [UInt8]
    private var index = 0
    private let depthLimit: Int

    private init(_ bytes: [UInt8], depthLimit: Int) {
        self.bytes = bytes
        self.depthLimit = depthLimit
    }

    /// Parses a whole document; trailing non-space bytes are an error. `maxDepth` may be raised
    /// for a document whose parts are judged one by one (an ingest batch: each event is held to
    /// `JSONParser.maxDepth` on its own, so one deep event does not fail the others).
    public static func parse(_ bytes: [UInt8], maxDepth: Int = JSONParser.maxDepth) throws(SyntaxError) -> JSONValue {
        var parser = JSONParser(bytes, depthLimit: maxDepth)
        parser.skipSpace()
        let value = try parser.parseValue(depth: 0)
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the JSON value") }
        return value
    }

    /// The values of a JSON array of arrays of `width` values each (what PostgreSQL's
    /// `json_agg(json_build_array(…))` writes), row after row in one list: rows without an
    /// array and a `JSONValue` each (a claim reads the devices of every job so).
    public static func rows(_ bytes: [UInt8], width: Int) throws(SyntaxError) -> [JSONValue] {
        var parser = JSONParser(bytes, depthLimit: maxDepth)
        var values: [JSONValue] = []
        try parser.expect("[")
        if !parser.consume("]") {
            repeat {
                try parser.expect("[")
                for column in 0..<width {
                    if column > 0 { try parser.expect(",") }
                    parser.skipSpace()
                    values.append(try parser.parseValue(depth: 2))
                }
                try parser.expect("]")
            } while parser.consume(",")
            try parser.expect("]")
        }
        parser.skipSpace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the JSON value") }
        return values
    }

    /// Skips space, then `byte`, or throws.
    private mutating func expect(_ byte: Unicode.Scalar) throws(SyntaxError) {
        guard consume(byte) else { throw error("expected '\(byte)'") }
    }

    /// Skips space, then `byte` if it is next; whether it was.
    private mutating func consume(_ byte: Unicode.Scalar) -> Bool {
        skipSpace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: byte) else { return false }
        index += 1
        return true
    }

    private func error(_ message: String) -> SyntaxError {
        SyntaxError(offset: index, message: message)
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0a, 0x0d: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(SyntaxError) -> JSONValue {
        guard depth < depthLimit else { throw error("nesting is deeper than \(depthLimit)") }
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: String) throws(SyntaxError) {
        let expected = Array(literal.utf8)
        guard index + expected.count <= bytes.count else { throw error("unexpected end of input") }
        for offset in 0..<expected.count where bytes[index + offset] != expected[offset] {
            throw error("invalid literal")
        }
        index += expected.count
    }

    private mutating func parseObject(depth: Int) throws(SyntaxError) -> JSONValue {
        index += 1
        var object: [String: JSONValue] = [:]
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipSpace()
            // One rule for every route: a key given twice is an error, not the first or the last.
            guard object[key] == nil else {
                var duplicate = error("the key \"\(key)\" is given twice")
                duplicate.field = key
                throw duplicate
            }
            object[key] = try parseValue(depth: depth + 1)
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "}") else { throw error("expected ',' or '}'") }
            index += 1
            return .object(object)
        }
    }

    private mutating func parseArray(depth: Int) throws(SyntaxError) -> JSONValue {
        index += 1
        var array: [JSONValue] = []
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(array)
        }
        while true {
            skipSpace()
            array.append(try parseValue(depth: depth + 1))
            skipSpace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            guard bytes[index] == UInt8(ascii: "]") else { throw error("expected ',' or ']'") }
            index += 1
            return .array(array)
        }
    }

    private mutating func parseString() throws(SyntaxError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes. ASCII needs no UTF-8 validation (and `String(validating:as:)`
        // is not specialised: it looks up generic metadata at every call, W5's device lists).
        var high: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = bytes[start..<index]
                index += 1
                if high < 0x80 { return String(decoding: slice, as: UTF8.self) }
                guard let text = String(validating: slice, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                return text
            }
            high |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character in a string") }
            index += 1
        }
        var out = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: out, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unexpected end of input") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5c)
                case UInt8(ascii: "/"): out.append(0x2f)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0c)
                case UInt8(ascii: "n"): out.append(0x0a)
                case UInt8(ascii: "r"): out.append(0x0d)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                            throw error("unpaired surrogate")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("unpaired surrogate")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    throw error("invalid escape")
                }
            default:
                if byte < 0x20 { throw error("control character in a string") }
                out.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws(SyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(SyntaxError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[index]) {
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
        } else {
            throw error("invalid number")
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw error("invalid number") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            let digits = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > digits else { throw error("invalid number") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger { return Int(text).map { .int($0) } ?? .bigInteger(text) }
        guard let value = Double(text) else { throw error("invalid number") }
        return .number(value, text: text)
    }
}

extension JSONValue {
    /// Compact JSON text of the value (keys sorted, so equal values give equal text).
    public var jsonText: String {
        var out: [UInt8] = []
        write(to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .int(let value): out.append(contentsOf: String(value).utf8)
        case .bigInteger(let digits): out.append(contentsOf: digits.utf8)
        case .double(let value):
            let text = value.isFinite ? (value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)) : "null"
            out.append(contentsOf: text.utf8)
        case .string(let value): JSONValue.appendString(value, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (offset, value) in values.enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (offset, key) in object.keys.sorted().enumerated() {
                if offset > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.appendString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                object[key]!.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `text` as a JSON string literal in UTF-8: `"` and `\` escaped, `\n`, `\r`, `\t`,
    /// other controls as `\u00XX`, everything else as it is. The one escaping rule of Herald's
    /// JSON (`jsonText` and `JSONWriter`).
    public static func appendString(_ text: String, to bytes: inout [UInt8]) {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        bytes.append(quote)
        // Most strings need no escape: scanned through a `Span` of their UTF-8 (safe, and twice
        // as fast as the UTF-8 view's iterator) and appended whole.
        let utf8 = text.utf8.span
        var clean = true
        for index in utf8.indices where utf8[index] < 0x20 || utf8[index] == quote || utf8[index] == backslash {
            clean = false
            break
        }
        if clean {
            bytes.append(contentsOf: text.utf8)
        } else {
            for byte in text.utf8 {
                guard byte < 0x20 || byte == quote || byte == backslash else {
                    bytes.append(byte)
                    continue
                }
                bytes.append(backslash)
                switch byte {
                case quote, backslash: bytes.append(byte)
                case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 15)]])
                }
            }
        }
        bytes.append(quote)
    }

    /// How many bytes `appendString` writes for `scalar` inside a string literal.
    public static func escapedUTF8Count(_ scalar: Unicode.Scalar) -> Int {
        switch scalar {
        case "\"", "\\", "\n", "\r", "\t": return 2
        default: return scalar.value < 0x20 ? 6 : UTF8.width(scalar)
        }
    }

    /// The member `key` of an object, nil otherwise.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }
}

extension JSONValue {
    /// Levels of nesting: 1 for a scalar, one more for each array or object around a value.
    public var depth: Int {
        switch self {
        case .array(let values): return 1 + (values.lazy.map(\.depth).max() ?? 0)
        case .object(let object): return 1 + (object.values.lazy.map(\.depth).max() ?? 0)
        default: return 1
        }
    }
}

extension JSONValue {
    /// Whether an integer beyond 64 bits is somewhere in the value.
    public var hasBigInteger: Bool {
        switch self {
        case .bigInteger: return true
        case .array(let values): return values.contains { $0.hasBigInteger }
        case .object(let object): return object.values.contains { $0.hasBigInteger }
        default: return false
        }
    }

    /// The value with every integer beyond 64 bits as a string of its digits.
    public var bigIntegersAsStrings: JSONValue {
        switch self {
        case .bigInteger(let digits): return .string(digits)
        case .array(let values): return .array(values.map(\.bigIntegersAsStrings))
        case .object(let object): return .object(object.mapValues(\.bigIntegersAsStrings))
        default: return self
        }
    }
}

extension JSONValue {
    /// The path (`delivery.url`, `jobs[0].token`; "" for the value itself) of the first string or
    /// key holding U+0000, keys taken in sorted order; nil when there is none. JSON may carry
    /// `\u0000`, but PostgreSQL's text and jsonb cannot hold it, so a reader refuses it by path.
    public var pathOfNUL: String? {
        switch self {
        case .string(let text):
            return text.utf8.contains(0) ? "" : nil
        case .array(let values):
            for (index, value) in values.enumerated() {
                if let path = value.pathOfNUL { return "[\(index)]" + (path.isEmpty || path.hasPrefix("[") ? path : "." + path) }
            }
            return nil
        case .object(let object):
            for key in object.keys.sorted() {
                if key.utf8.contains(0) { return key }
                if let path = object[key]!.pathOfNUL { return key + (path.isEmpty || path.hasPrefix("[") ? path : "." + path) }
            }
            return nil
        default:
            return nil
        }
    }
}
