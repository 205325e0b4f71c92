import HTTPTypes
import JSON

/// `userRateLimit` (SPEC §15): a token bucket per user, `burst` deep, refilled at `perSecond`.
package struct UserRateLimit: Sendable, Equatable {
    package var perSecond: Double
    package var burst: Int

    package static let `default` = UserRateLimit(perSecond: 20, burst: 40)
    package static let maxPerSecond: Double = 100_000
    /// One request in 1,000 s: slower rates are refused (their bucket arithmetic would overflow).
    package static let minPerSecond = 0.001
    package static let maxBurst = 100_000

    package var json: JSONValue {
        .object(["perSecond": perSecond == perSecond.rounded() ? .int(Int(perSecond)) : .double(perSecond), "burst": .int(burst)])
    }

    /// Merges a PATCH of `userRateLimit`; `400 ERR_INVALID_PREFERENCE` naming the field otherwise.
    package mutating func apply(patch: JSONValue, field: String) throws(HTTPError) {
        guard case .object(let object) = patch else {
            throw PreferenceField.invalid("\(field) must be {\"perSecond\", \"burst\"}", field: field)
        }
        for (name, value) in object {
            switch name {
            case "perSecond":
                let rate: Double? = switch value {
                case .int(let number): Double(number)
                case .double(let number): number
                default: nil
                }
                guard let rate, rate >= Self.minPerSecond, rate <= Self.maxPerSecond else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field).perSecond must be a number from 0.001 to 100000",
                                    // No `min`: SPEC §3's params.min is an integer (the message says 0.001).
                                    params: ["field": .string(field + ".perSecond"), "max": .int(Int(Self.maxPerSecond))])
                }
                perSecond = rate
            case "burst":
                guard case .int(let depth) = value, (1...Self.maxBurst).contains(depth) else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field).burst must be an integer from 1 to 100000",
                                    params: ["field": .string(field + ".burst"), "min": 1, "max": .int(Self.maxBurst)])
                }
                burst = depth
            default:
                throw PreferenceField.invalid("\(field).\(name) is not known", field: "\(field).\(name)")
            }
        }
    }
}

/// `corsOrigins` (SPEC §15): the web origins whose pages may call `/v1/me/…` with a user token,
/// and the CORS headers Herald answers them with (no credentials: the token is a header).
package enum CORS {
    package static let maxCount = 100
    /// The request headers a page may send.
    package static let allowedHeaders = "Authorization, Content-Type, X-Request-Id"
    /// The response headers a page may read besides the simple ones.
    package static let exposedHeaders = "Retry-After, WWW-Authenticate, X-Request-Id"
    /// How long a browser may keep a preflight's answer.
    package static let maxAgeSeconds = 600

    /// The headers of a response to an allowed origin.
    package static func allow(_ origin: String) -> [String: String] {
        ["Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": exposedHeaders, "Vary": "Origin"]
    }

    /// Whether `text` is an origin as browsers send it: `http` or `https`, `://`, a lower-case
    /// host name or address, an optional port, and nothing after (no path, no trailing `/`).
    package static func isOrigin(_ text: String) -> Bool {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count <= 253 + 14 else { return false }
        let rest: Substring
        if text.hasPrefix("https://") { rest = text.dropFirst(8) } else if text.hasPrefix("http://") { rest = text.dropFirst(7) } else { return false }
        var host = rest
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            host = rest[..<colon]
            let port = rest[rest.index(after: colon)...]
            guard !port.isEmpty, port.count <= 5, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber), port.first != "0",
                  let number = Int(port), (1...65535).contains(number) else { return false }
        }
        if host.hasPrefix("[") {
            return host.hasSuffix("]") && host.count > 2
                && host.dropFirst().dropLast().allSatisfy { $0.isASCII && ($0.isHexDigit && !$0.isUppercase || $0 == ":" || $0 == ".") }
        }
        guard !host.isEmpty, !host.hasPrefix("."), !host.hasSuffix("."), !host.contains("..") else { return false }
        return host.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == ".") }
    }

    /// Validates a PATCH of `corsOrigins`: a list of distinct origins.
    package static func validate(_ value: JSONValue, field: String) throws(HTTPError) -> [String] {
        guard case .array(let items) = value else { throw PreferenceField.invalid("\(field) must be a list of origins", field: field) }
        guard items.count <= maxCount else {
            throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field) holds at most \(maxCount) origins",
                            params: ["field": .string(field), "max": .int(maxCount)])
        }
        var origins: [String] = []
        for (index, item) in items.enumerated() {
            guard case .string(let origin) = item, isOrigin(origin) else {
                throw PreferenceField.invalid("\(field)[\(index)] must be an origin such as https://app.example.com (lower case, no path)",
                                              field: "\(field)[\(index)]")
            }
            if !origins.contains(origin) { origins.append(origin) }
        }
        return origins
    }
}

/// An app's settings that user requests need, read with the token's key in one query.
package struct UserAccessSettings: Sendable, Equatable {
    package var corsOrigins: [String] = []
    package var rateLimit = UserRateLimit.default

    /// From the stored settings' JSON texts (nil when the app has stored none); a damaged part
    /// falls back to its default.
    package init(corsOrigins: String?, userRateLimit: String?) {
        if let text = corsOrigins, let value = try? JSONParser.parse(Array(text.utf8)),
           let origins = try? CORS.validate(value, field: "corsOrigins") {
            self.corsOrigins = origins
        }
        if let text = userRateLimit, let value = try? JSONParser.parse(Array(text.utf8)) {
            var limit = UserRateLimit.default
            if (try? limit.apply(patch: value, field: "userRateLimit")) != nil { rateLimit = limit }
        }
    }
}

