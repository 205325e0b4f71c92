import HTTPServer
import JSON
import Locking

/// `userRateLimit` (SPEC §15): a token bucket per user, `burst` deep, refilled at `perSecond`.
public struct UserRateLimit: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Int

    public static let `default` = UserRateLimit(perSecond: 20, burst: 40)
    static let maxPerSecond: Double = 100_000
    static let maxBurst = 100_000

    public var json: JSONValue {
        .object(["perSecond": perSecond == perSecond.rounded() ? .int(Int(perSecond)) : .double(perSecond), "burst": .int(burst)])
    }

    /// Merges a PATCH of `userRateLimit`; `400 ERR_INVALID_PREFERENCE` naming the field otherwise.
    mutating func apply(patch: JSONValue, field: String) throws(HTTPError) {
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
                guard let rate, rate > 0, rate <= Self.maxPerSecond else {
                    throw HTTPError(status: 400, code: "ERR_INVALID_PREFERENCE", message: "\(field).perSecond must be a number above 0, at most 100000",
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
public enum CORS {
    static let maxCount = 100
    /// The request headers a page may send.
    static let allowedHeaders = "Authorization, Content-Type, X-Request-Id"
    /// The response headers a page may read besides the simple ones.
    static let exposedHeaders = "Retry-After, WWW-Authenticate, X-Request-Id"
    /// How long a browser may keep a preflight's answer.
    static let maxAgeSeconds = 600

    /// The headers of a response to an allowed origin.
    static func allow(_ origin: String) -> [String: String] {
        ["Access-Control-Allow-Origin": origin, "Access-Control-Expose-Headers": exposedHeaders, "Vary": "Origin"]
    }

    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`) for a user
    /// route: 204 with the methods of the path when the origin is listed by some app and the
    /// method is one of them, else 403 without CORS headers (the browser then refuses the call).
    static func preflight(origin: String, method: String, allowed: [String], originListed: Bool) -> Response {
        guard originListed, allowed.contains(method) else {
            var response = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                     message: originListed ? "this method is not served on this path" : "no app allows this origin").response
            response.headers.append(("Vary", "Origin"))
            return response
        }
        return Response(status: 204, headers: [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", allowed.joined(separator: ", ")),
            ("Access-Control-Allow-Headers", allowedHeaders), ("Access-Control-Max-Age", String(maxAgeSeconds)), ("Vary", "Origin"),
        ])
    }

    /// Whether `text` is an origin as browsers send it: `http` or `https`, `://`, a lower-case
    /// host name or address, an optional port, and nothing after (no path, no trailing `/`).
    static func isOrigin(_ text: String) -> Bool {
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
    static func validate(_ value: JSONValue, field: String) throws(HTTPError) -> [String] {
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
struct UserAccessSettings: Sendable, Equatable {
    var corsOrigins: [String] = []
    var rateLimit = UserRateLimit.default

    /// From the stored settings' JSON texts (nil when the app has stored none); a damaged part
    /// falls back to its default.
    init(corsOrigins: String?, userRateLimit: String?) {
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

/// The per-user token buckets of one instance. A mutex makes each take exact under concurrent
/// requests; buckets that have refilled are dropped when the table grows, so memory follows the
/// users active in the last `burst / perSecond` seconds.
final class UserRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: UInt64
        var fullAt: UInt64
    }

    private let buckets = Lock([String: Bucket]())
    private let sweepAbove: Int

    init(sweepAbove: Int = 100_000) {
        self.sweepAbove = sweepAbove
    }

    /// Takes one token of `user`'s bucket; nil when allowed, else the seconds until one is back.
    func take(app: String, uid: String, limit: UserRateLimit, now: UInt64 = monotonicNanoseconds()) -> Int? {
        let key = app + "\u{1F}" + uid
        return buckets.withLock { table -> Int? in
            var bucket = table[key] ?? Bucket(tokens: Double(limit.burst), updated: now, fullAt: now)
            let elapsed = Double(now &- bucket.updated) / 1e9
            bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * limit.perSecond)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            bucket.fullAt = now &+ UInt64(max(0, Double(limit.burst) - bucket.tokens) / limit.perSecond * 1e9)
            if table.count >= sweepAbove && table[key] == nil {
                table = table.filter { $0.value.fullAt > now }
            }
            table[key] = bucket
            return allowed ? nil : max(1, Int(((1 - bucket.tokens) / limit.perSecond).rounded(.up)))
        }
    }
}
