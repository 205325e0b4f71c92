import HeraldDomain
import HeraldStore
import HTTPServer
import JSON
import Locking

extension CORS {
    /// The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`) for a user
    /// route: 204 with the methods of the path when the origin is listed by some app and the
    /// method is one of them, else 403 without CORS headers (the browser then refuses the call).
    package static func preflight(origin: String, method: String, allowed: [HTTPMethod], originListed: Bool) -> Response {
        guard originListed, allowed.contains(HTTPMethod(method)) else {
            var response = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                     message: originListed ? "this method is not served on this path" : "no app allows this origin").response
            response.headers.append(("Vary", "Origin"))
            return response
        }
        return Response(status: 204, headers: [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", allowed.map(\.rawValue).joined(separator: ", ")),
            ("Access-Control-Allow-Headers", allowedHeaders), ("Access-Control-Max-Age", String(maxAgeSeconds)), ("Vary", "Origin"),
        ])
    }
}

/// The per-user token buckets of one instance. A mutex makes each take exact under concurrent
/// requests. Memory follows the users active lately: when the table has doubled since the last
/// sweep, buckets that have refilled (or sat idle for `idleHorizonSeconds`, whatever their rate)
/// are dropped, so a sweep's cost is spread over the insertions that made it necessary; beyond
/// `maxBuckets` the table starts afresh (every user then gets a full bucket once).
package final class UserRateLimiter: Sendable {
    private struct Bucket {
        package var tokens: Double
        package var updated: UInt64
        /// When the bucket is full again, or the idle horizon ends, whichever is sooner.
        package var forgettableAt: UInt64
    }

    private struct Table {
        package var buckets: [String: Bucket] = [:]
        package var nextSweep: Int
    }

    package static let idleHorizonSeconds: Double = 3600
    private let table: Lock<Table>
    private let sweepAbove: Int
    private let maxBuckets: Int

    package init(sweepAbove: Int = 100_000, maxBuckets: Int = 1_000_000) {
        self.sweepAbove = sweepAbove
        self.maxBuckets = maxBuckets
        table = Lock(Table(nextSweep: sweepAbove))
    }

    /// Takes one token of `user`'s bucket; nil when allowed, else the seconds until one is back
    /// (at most a day).
    package func take(app: String, uid: String, limit: UserRateLimit, now: UInt64 = monotonicNanoseconds()) -> Int? {
        let key = app + "\u{1F}" + uid
        let rate = max(limit.perSecond, UserRateLimit.minPerSecond)
        return table.withLock { table -> Int? in
            var bucket = table.buckets[key] ?? Bucket(tokens: Double(limit.burst), updated: now, forgettableAt: now)
            let elapsed = Double(now &- bucket.updated) / 1e9
            bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * rate)
            bucket.updated = now
            let allowed = bucket.tokens >= 1
            if allowed { bucket.tokens -= 1 }
            let refill = min(max(0, Double(limit.burst) - bucket.tokens) / rate, Self.idleHorizonSeconds)
            bucket.forgettableAt = now &+ UInt64(refill * 1e9)
            if table.buckets[key] == nil && table.buckets.count >= table.nextSweep {
                table.buckets = table.buckets.filter { $0.value.forgettableAt > now }
                if table.buckets.count >= maxBuckets { table.buckets.removeAll() }
                table.nextSweep = max(sweepAbove, table.buckets.count * 2)
            }
            table.buckets[key] = bucket
            guard !allowed else { return nil }
            return Int(min(86_400, max(1, ((1 - bucket.tokens) / rate).rounded(.up))))
        }
    }

    /// How many buckets the table holds (for tests).
    package var count: Int { table.withLock { $0.buckets.count } }
}
