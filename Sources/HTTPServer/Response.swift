import FoundationEssentials
import JSON

/// An HTTP response: status, headers and a body held in memory.
public struct Response: Sendable {
    /// The HTTP status.
    public var status: Int
    /// Response headers, in order (names as written).
    public var headers: [(name: String, value: String)]
    /// The body bytes.
    public var body: [UInt8]
    /// Fields the handler adds to the request's log line (never sent to the client).
    public var logFields: [String: JSONValue] = [:]

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

    /// A JSON response written by the value itself (Herald's response types).
    public static func json(_ value: some JSONWritable, status: Int = 200) -> Response {
        var writer = JSONWriter()
        value.write(to: &writer)
        return Response(status: status, headers: [("Content-Type", "application/json")], body: writer.bytes)
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
