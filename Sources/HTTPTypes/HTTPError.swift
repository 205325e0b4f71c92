import FoundationEssentials
import JSON

/// An error that knows its HTTP status and its wire code, rendered as
/// `{"error": {"code", "message", "params"}}`.
public struct HTTPError: Error, Sendable, Equatable {
    /// The HTTP status.
    public var status: Int
    /// The wire code of SPEC §3's table (`ERR_…`).
    public var code: String
    /// A sentence for people; never holds a secret.
    public var message: String
    /// `error.params`: the field at fault and the limits that apply.
    public var params: [String: JSONValue]
    /// Extra response headers (`Retry-After`, `Allow`).
    public var headers: [String: String]

    /// An error with its status, code, message and, optionally, params and extra headers.
    public init(status: Int, code: String, message: String, params: [String: JSONValue] = [:],
                headers: [String: String] = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.params = params
        self.headers = headers
    }

    /// `400 ERR_BAD_REQUEST`, naming the offending input's path in `params.field` when known.
    public static func badRequest(_ message: String, field: String? = nil,
                                  params: [String: JSONValue] = [:]) -> HTTPError {
        var all = params
        if let field { all["field"] = .string(field) }
        return HTTPError(status: 400, code: "ERR_BAD_REQUEST", message: message, params: all)
    }

    /// `400 ERR_INVALID_LIMIT` for a `limit` outside `min...max`.
    public static func invalidLimit(field: String = "limit", min: Int, max: Int) -> HTTPError {
        HTTPError(status: 400, code: "ERR_INVALID_LIMIT", message: "\(field) must be an integer from \(min) to \(max)",
                  params: ["field": .string(field), "min": .int(min), "max": .int(max)])
    }

    /// `404 ERR_NOT_FOUND`: no route has this path.
    public static let notFound = HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "no such route")

    /// `405 ERR_METHOD_NOT_ALLOWED` with the `Allow` header.
    public static func methodNotAllowed(allowed: [HTTPMethod]) -> HTTPError {
        HTTPError(status: 405, code: "ERR_METHOD_NOT_ALLOWED", message: "method not allowed on this route",
                  headers: ["Allow": allowed.map(\.rawValue).joined(separator: ", ")])
    }

    /// `413 ERR_PAYLOAD_TOO_LARGE`, naming the limit in `params.max`.
    public static func payloadTooLarge(limit: Int) -> HTTPError {
        HTTPError(status: 413, code: "ERR_PAYLOAD_TOO_LARGE", message: "request body is larger than \(limit) bytes",
                  params: ["max": .int(limit)])
    }

    /// `415 ERR_UNSUPPORTED_MEDIA_TYPE`, naming the types the route takes.
    public static func unsupportedMediaType(expected: [String]) -> HTTPError {
        HTTPError(status: 415, code: "ERR_UNSUPPORTED_MEDIA_TYPE",
                  message: "Content-Type must be \(expected.joined(separator: " or "))",
                  params: ["field": "Content-Type"])
    }

    /// `429 ERR_OVERLOADED` with `Retry-After`.
    public static func overloaded(retryAfterSeconds: Int = 1) -> HTTPError {
        HTTPError(status: 429, code: "ERR_OVERLOADED", message: "too many requests in flight; retry later",
                  headers: ["Retry-After": String(retryAfterSeconds)])
    }

    /// `503 ERR_UNAVAILABLE` with `Retry-After`: the database is away.
    public static func unavailable(retryAfterSeconds: Int = 2) -> HTTPError {
        HTTPError(status: 503, code: "ERR_UNAVAILABLE", message: "the database is unavailable; retry later",
                  headers: ["Retry-After": String(retryAfterSeconds)])
    }

    /// A bare 500: the details belong in the log, never in the response.
    public static let internalError = HTTPError(status: 500, code: "ERR_INTERNAL", message: "internal error")

    /// `400 ERR_BAD_REQUEST` for a body that is not JSON, saying why and where.
    public static func invalidJSON(_ error: JSONParser.SyntaxError) -> HTTPError {
        .badRequest("body is not valid JSON: \(error.message) at byte \(error.offset)", field: error.field)
    }
}
