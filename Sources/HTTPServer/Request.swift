/// An HTTP request as the handlers see it: a plain value, read in full before the handler runs.
public struct Request: Sendable {
    /// The method (`.get`, `.post`, …).
    public let method: HTTPMethod
    /// The path without the query string, percent-decoded.
    public let path: String
    /// Query parameters, percent-decoded; the first value of a repeated name.
    public let query: [String: String]
    /// Header values by lower-case name; repeated headers are joined with ", ".
    public let headers: [String: String]
    /// The body, empty when the client sent none or when it exceeded the size limit.
    public let body: [UInt8]
    /// True when the body was larger than the server's limit and was discarded.
    public let bodyTooLarge: Bool
    /// The request id: the client's `X-Request-Id` when it is sane, else a random one.
    public let id: String
    /// When the server began reading the request, in monotonic nanoseconds.
    public let startedAt: UInt64
    /// For answering later (long polls); nil outside a server.
    public let deferral: Deferral?
    /// The path's segments (after the leading `/`, counted from 0) that were not valid UTF-8 once
    /// percent-decoded; `path` holds them with U+FFFD, so they must not be used as ids.
    public let invalidPathSegments: [Int]

    /// A request as the server builds it (tests build them too).
    public init(method: HTTPMethod, path: String, query: [String: String] = [:], headers: [String: String] = [:],
                body: [UInt8] = [], bodyTooLarge: Bool = false, id: String = "test", startedAt: UInt64 = 0,
                deferral: Deferral? = nil, invalidPathSegments: [Int] = []) {
        self.method = method
        self.invalidPathSegments = invalidPathSegments
        self.path = path
        self.query = query
        var lowered = [String: String]()
        for (name, value) in headers { lowered[name.lowercased()] = value }
        self.headers = lowered
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.id = id
        self.startedAt = startedAt
        self.deferral = deferral
    }

    /// A header's value by case-insensitive name.
    public func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }

    /// The media type of the body without parameters, lower-cased (`application/json`).
    public var mediaType: String? {
        guard let value = header("content-type") else { return nil }
        let type = value.split(separator: ";", maxSplits: 1).first.map(String.init) ?? value
        return type.trimmingSpaces().lowercased()
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    func trimmingSpaces() -> String {
        var slice = Substring(self)
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return String(slice)
    }
}
