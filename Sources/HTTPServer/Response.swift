import FoundationEssentials

/// An HTTP response: status, headers and a body held in memory.
public struct Response: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Response headers, in order (names as written).
    public var headers: [(name: String, value: String)]
    /// The body bytes.
    public var body: [UInt8]

    /// A response with a status, headers and body.
    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    /// A JSON response encoded from `value`.
    public static func json<T: Encodable>(_ value: T, status: Int = 200) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return Response(status: status, headers: [("Content-Type", "application/json")], body: Array(data))
    }

    /// A JSON response whose text is already JSON (for example built by PostgreSQL).
    public static func jsonText(_ text: String, status: Int = 200) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json")], body: Array(text.utf8))
    }

    /// `204 No Content`.
    public static func noContent() -> Response {
        Response(status: 204)
    }
}
