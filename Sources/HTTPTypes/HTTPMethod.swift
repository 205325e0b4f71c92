/// An HTTP method (RFC 9110 §9), as requests carry it and routes are registered under it: the
/// known ones as constants, any other token as sent (a route can only be registered under a
/// constant, and a request with another method matches none).
public struct HTTPMethod: Hashable, Sendable, CustomStringConvertible {
    /// The method's token, upper-case (`GET`).
    public let rawValue: String

    /// The method a request line names (kept as sent: methods are case-sensitive).
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let patch = HTTPMethod("PATCH")
    public static let delete = HTTPMethod("DELETE")
    public static let options = HTTPMethod("OPTIONS")

    /// Whether a request with this method only reads (RFC 9110 §9.2.1), so it may be answered
    /// again from a fresh start.
    public var isSafe: Bool { self == .get || self == .head || self == .options }
}
