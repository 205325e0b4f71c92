/// A statement with its parameters, written as one string: an interpolated value is a parameter.
///
///     connection.query("SELECT id FROM devices WHERE app = \(app) AND uid = ANY (\(uids)::text[])")
///
/// sends `SELECT id FROM devices WHERE app = $1 AND uid = ANY ($2::text[])` with `app` and `uids`
/// as `$1` and `$2`, never spliced into the text. The statement's text depends only on the
/// literal parts, so it is prepared once per connection and reused (PostgresNIO's
/// `PostgresQuery` has the same shape). Two interpolations of one value are two parameters.
///
/// Text that is not a value — a fragment chosen by the code, a table name — goes in only as
/// another `SQL` (`\(fragment)`, whose parameters are renumbered into this one's) or through
/// `\(unsafeRaw:)`, whose name says it must never carry input.
public struct SQL: Sendable, ExpressibleByStringInterpolation {
    /// The literal text between parameters: `parameters.count + 1` pieces.
    @usableFromInline var pieces: [String]
    /// The parameters, in order.
    public private(set) var parameters: [any PostgresEncodable]

    /// The statement's text with `$1`, `$2`, … in place of the parameters.
    public var text: String {
        guard parameters.count > 0 else { return pieces[0] }
        var text = pieces[0]
        for index in parameters.indices {
            text += "$"
            text += String(index + 1)
            text += pieces[index + 1]
        }
        return text
    }

    /// A statement without parameters.
    public init(stringLiteral value: String) {
        pieces = [value]
        parameters = []
    }

    /// A statement from interpolated text.
    public init(stringInterpolation: StringInterpolation) {
        pieces = stringInterpolation.pieces
        parameters = stringInterpolation.parameters
    }

    /// Text that is not a literal in the code (a migration file, text built from fragments the
    /// code chose). Named unsafe: never pass text that holds input.
    public init(unsafeRaw text: String) {
        pieces = [text]
        parameters = []
    }

    /// Appends `other` (its parameters renumbered after this one's).
    public static func + (lhs: SQL, rhs: SQL) -> SQL {
        var joined = lhs
        joined.pieces[joined.pieces.count - 1] += rhs.pieces[0]
        joined.pieces.append(contentsOf: rhs.pieces.dropFirst())
        joined.parameters.append(contentsOf: rhs.parameters)
        return joined
    }

    /// Fragments joined with `separator` between them (`", "`, `" AND "`).
    public static func joined(_ fragments: [SQL], separator: String) -> SQL {
        guard var joined = fragments.first else { return "" }
        for fragment in fragments.dropFirst() { joined = joined + SQL(unsafeRaw: separator) + fragment }
        return joined
    }

    /// Builds an `SQL` piece by piece: literals as text, interpolations as parameters.
    public struct StringInterpolation: StringInterpolationProtocol {
        var pieces: [String] = [""]
        var parameters: [any PostgresEncodable] = []

        /// Room for the statement's literal text.
        public init(literalCapacity: Int, interpolationCount: Int) {
            pieces.reserveCapacity(interpolationCount + 1)
            parameters.reserveCapacity(interpolationCount)
            pieces[0].reserveCapacity(literalCapacity)
        }

        /// Literal statement text.
        public mutating func appendLiteral(_ literal: String) {
            pieces[pieces.count - 1] += literal
        }

        /// A value, sent as the next parameter.
        public mutating func appendInterpolation(_ value: some PostgresEncodable) {
            parameters.append(value)
            pieces.append("")
        }

        /// A value or NULL, sent as the next parameter.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            parameters.append(value)
            pieces.append("")
        }

        /// A fragment of statement text with its own parameters, renumbered into this one's.
        public mutating func appendInterpolation(_ fragment: SQL) {
            pieces[pieces.count - 1] += fragment.pieces[0]
            pieces.append(contentsOf: fragment.pieces.dropFirst())
            parameters.append(contentsOf: fragment.parameters)
        }

        /// Text spliced into the statement as it is. Never pass input.
        public mutating func appendInterpolation(unsafeRaw text: String) {
            pieces[pieces.count - 1] += text
        }
    }
}

extension SQL: CustomStringConvertible {
    /// The text, without the parameters' values (they may be secrets).
    public var description: String { text }
}
