import HTTPServer
import Postgres
import JSON

/// SPEC §9: the jobs API for push senders (worker and server roles).
enum JobsAPI {
    static let maxAttempts = 8

    static func register(in router: inout Router<Route>) {
        router.add("POST", "/v1/jobs/claim", Route(access: .worker, accepts: Route.json, handler: claim))
        router.add("POST", "/v1/jobs/ack", Route(access: .worker, accepts: Route.json, handler: ack))
        router.add("POST", "/v1/jobs/fail", Route(access: .worker, accepts: Route.json, handler: fail))
        router.add("GET", "/v1/jobs/stats", Route(access: .worker, handler: stats))
        router.add("GET", "/v1/jobs/dead", Route(access: .worker, handler: dead))
        router.add("POST", "/v1/jobs/dead/requeue", Route(access: .worker, accepts: Route.json, handler: requeue))
    }

    static func integer(_ object: [String: JSONValue], _ key: String, default value: Int, range: ClosedRange<Int>) throws(HTTPError) -> Int {
        guard let item = object[key], item != .null else { return value }
        if case .bigInteger = item { throw HTTPError.invalidLimit(field: key, min: range.lowerBound, max: range.upperBound) }
        guard case .int(let number) = item else {
            throw HTTPError.badRequest("\(key) must be an integer", field: key)   // a wrong type, not a range
        }
        guard range.contains(number) else {
            throw HTTPError.invalidLimit(field: key, min: range.lowerBound, max: range.upperBound)
        }
        return number
    }

    /// "j123" → 123.
    static func jobID(_ value: JSONValue?, field: String) throws(HTTPError) -> Int64 {
        guard case .string(let text)? = value, text.hasPrefix("j"), let id = Int64(text.dropFirst()), id > 0 else {
            throw HTTPError.badRequest("\(field) must be a job id", field: field)
        }
        return id
    }

    static func claim(_ context: RequestContext) throws -> Response {
        let object = try context.request.jsonObject()
        let max = try integer(object, "max", default: 100, range: 1...1000)
        let lease = try integer(object, "leaseSeconds", default: 30, range: 1...3600)
        let wait = try integer(object, "waitSeconds", default: 0, range: 0...30)
        let (count, response) = try claimOnce(app: context.app, max: max, leaseSeconds: lease, database: context.services.database,
                                              metrics: context.services.metrics)
        guard count == 0, wait > 0, let deferral = context.request.deferral else { return response }
        // Nothing yet: the connection waits without a server thread until jobs come or time is up.
        context.services.jobWaiter.wait(.init(app: context.app, max: max, leaseSeconds: lease,
                                              deadline: monotonicNanoseconds() + UInt64(wait) * 1_000_000_000,
                                              deferral: deferral))
        return .deferred
    }

    /// One claim: returns expired leases to the queue, then leases up to `max` ready jobs.
    static func claimOnce(app: String, max: Int, leaseSeconds: Int, database: PostgresPool,
                          metrics: Metrics) throws -> (Int, Response) {
        let jobs = try database.withTransaction { connection -> [JobPayload] in
            try connection.query("""
                UPDATE jobs SET state = 'ready', available_at = lease_until, lease_until = NULL, updated_at = herald_now_ms()
                 WHERE app = $1 AND state = 'leased' AND lease_until <= herald_now_ms()
                """, [app])
            // The picked rows are updated through their ctid (a Tid Scan in every plan). A join
            // on (app, id) was planned, depending on statistics, as a scan of every job of the
            // app: as a generic plan's hash join, or, for an app newer than the last ANALYZE,
            // through another index led by app. Either took seconds per claim once the table
            // held a few hundred thousand jobs (W5 of make bench). The rows are locked by the
            // subquery, so their ctids cannot change before the update.
            let rows = try connection.query("""
                WITH claimed AS (
                    UPDATE jobs j SET state = 'leased', attempt = j.attempt + 1,
                                      lease_until = herald_now_ms() + $3::bigint * 1000, updated_at = herald_now_ms()
                     WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM jobs
                                                WHERE app = $1 AND state = 'ready' AND available_at <= herald_now_ms()
                                                ORDER BY available_at, id LIMIT $2
                                                FOR UPDATE SKIP LOCKED))
                    RETURNING j.*)
                SELECT \(JobPayload.columns)
                  FROM claimed j JOIN messages m ON m.app = j.app AND m.id = j.message_id
                 ORDER BY j.id
                """, [app, max, leaseSeconds])
            return try rows.map { try JobPayload(row: $0) }
        }
        metrics.add(.jobsClaimed, jobs.count)
        return (jobs.count, .json(ClaimedJobs(jobs: jobs)))
    }

    /// Reads `{"jobs": [{"id", "attempt", …}]}`.
    static func entries(_ object: [String: JSONValue]) throws(HTTPError) -> [(Int64, Int, [String: JSONValue])] {
        guard case .array(let items)? = object["jobs"] else { throw HTTPError.badRequest("jobs must be an array", field: "jobs") }
        guard items.count <= 1000 else { throw HTTPError.invalidLimit(field: "jobs", min: 0, max: 1000) }
        var result: [(Int64, Int, [String: JSONValue])] = []
        for (index, item) in items.enumerated() {
            guard case .object(let entry) = item else { throw HTTPError.badRequest("jobs[\(index)] must be an object", field: "jobs[\(index)]") }
            let id = try jobID(entry["id"], field: "jobs[\(index)].id")
            guard case .int(let attempt)? = entry["attempt"], attempt >= 1, attempt <= Int(Int32.max) else {
                throw HTTPError.badRequest("jobs[\(index)].attempt must be a positive integer", field: "jobs[\(index)].attempt")
            }
            result.append((id, attempt, entry))
        }
        return result
    }

    static func ack(_ context: RequestContext) throws -> Response {
        let items = try entries(try context.request.jsonObject())
        // `invalidDevices`: the push service refused these devices' tokens (SPEC §13.1).
        var invalid: [Int64: [String]] = [:]
        for (index, item) in items.enumerated() {
            guard let value = item.2["invalidDevices"], value != .null else { continue }
            guard case .array(let ids) = value, ids.count <= DeviceStore.maxPerUser else {
                throw HTTPError.badRequest("jobs[\(index)].invalidDevices must be a list of device ids", field: "jobs[\(index)].invalidDevices")
            }
            for (position, id) in ids.enumerated() {
                guard case .string(let text) = id, Identifier.isValid(text) else {
                    throw HTTPError.badRequest("jobs[\(index)].invalidDevices[\(position)] must be a device id",
                                               field: "jobs[\(index)].invalidDevices[\(position)]")
                }
                invalid[item.0, default: []].append(text)
            }
        }
        let rows = try context.services.database.withTransaction { connection in
            let rows = try connection.query("""
                UPDATE jobs j SET state = 'acked', lease_until = NULL, updated_at = herald_now_ms()
                  FROM unnest($2::bigint[], $3::int[]) AS x(id, attempt)
                 WHERE j.app = $1 AND j.id = x.id AND j.attempt = x.attempt AND j.state = 'leased'
                RETURNING j.id, j.recipient
                """, [context.app, items.map(\.0), items.map(\.1)])
            // Only the jobs this ack acknowledged say whose devices they are.
            var pairs: [(uid: String, id: String)] = []
            for row in rows {
                for device in invalid[try row.decode("id", as: Int64.self)] ?? [] { pairs.append((try row.decode("recipient"), device)) }
            }
            try DeviceStore().remove(app: context.app, pairs: pairs, on: connection)
            return rows
        }
        let acked = Set(try rows.map { try $0.decode("id", as: Int64.self) })
        context.services.metrics.add(.jobsAcked, acked.count)
        return .json(AckResult(acked: acked.count, stale: items.map(\.0).filter { !acked.contains($0) }))
    }

    static func fail(_ context: RequestContext) throws -> Response {
        let items = try entries(try context.request.jsonObject())
        var delays: [Int64] = []
        var dead: [Bool] = []
        var errors: [String] = []
        var generator = SystemRandomNumberGenerator()
        for (index, item) in items.enumerated() {
            let (_, attempt, entry) = item
            var retryable = true
            if let value = entry["retryable"], value != .null {
                guard case .bool(let flag) = value else {
                    throw HTTPError.badRequest("jobs[\(index)].retryable must be a boolean", field: "jobs[\(index)].retryable")
                }
                retryable = flag
            }
            var delay: Int64
            if let value = entry["retryAfterSeconds"], value != .null {
                guard case .int(let seconds) = value, (0...86_400).contains(seconds) else {
                    throw HTTPError.badRequest("jobs[\(index)].retryAfterSeconds must be 0-86400", field: "jobs[\(index)].retryAfterSeconds")
                }
                delay = Int64(seconds) * 1000
            } else {
                // Exponential backoff from 1 s, capped at 5 minutes, with "equal jitter".
                let base = min(Int64(300_000), Int64(1000) << min(attempt - 1, 20))
                delay = base / 2 + Int64.random(in: 0...(base / 2), using: &generator)
            }
            delays.append(delay)
            dead.append(!retryable || attempt >= maxAttempts)
            var message = ""
            if case .string(let text)? = entry["error"] { message = String(text.prefix(2000)) }
            errors.append(message.replacing("\u{0}", with: ""))
        }
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                UPDATE jobs j SET state = CASE WHEN x.dead THEN 'dead' ELSE 'ready' END,
                                  available_at = herald_now_ms() + x.delay, lease_until = NULL,
                                  last_error = x.error, updated_at = herald_now_ms()
                  FROM unnest($2::bigint[], $3::int[], $4::bigint[], $5::boolean[], $6::text[]) AS x(id, attempt, delay, dead, error)
                 WHERE j.app = $1 AND j.id = x.id AND j.attempt = x.attempt AND j.state = 'leased'
                RETURNING j.id, j.state
                """, [context.app, items.map(\.0), items.map(\.1), delays, dead, errors])
        }
        var retrying = 0, deadCount = 0
        var handled: Set<Int64> = []
        for row in rows {
            handled.insert(try row.decode(0, as: Int64.self))
            if try row.decode(1, as: String.self) == "dead" { deadCount += 1 } else { retrying += 1 }
        }
        context.services.metrics.add(.jobsRetried, retrying)
        context.services.metrics.add(.jobsDead, deadCount)
        return .json(FailResult(dead: deadCount, retrying: retrying, stale: items.map(\.0).filter { !handled.contains($0) }))
    }

    /// The queue's counts over `jobs` rows in state ready, leased or dead: ready (including
    /// expired leases), leased, retrying (waiting for their backoff), dead, and the oldest ready
    /// job's age in ms. Shared by the stats route (one app) and `/metrics` (every app).
    static let queueCounts = """
        count(*) FILTER (WHERE (state = 'ready' AND available_at <= herald_now_ms())
                           OR (state = 'leased' AND lease_until <= herald_now_ms())) AS ready,
        count(*) FILTER (WHERE state = 'leased' AND lease_until > herald_now_ms()) AS leased,
        count(*) FILTER (WHERE state = 'ready' AND available_at > herald_now_ms()) AS retrying,
        count(*) FILTER (WHERE state = 'dead') AS dead,
        coalesce(herald_now_ms() - min(available_at) FILTER (WHERE state = 'ready' AND available_at <= herald_now_ms()), 0)
            AS oldest_ready_age_ms
        """

    static func stats(_ context: RequestContext) throws -> Response {
        let rows = try context.services.database.withConnection { connection in
            try connection.query("SELECT \(queueCounts) FROM jobs WHERE app = $1 AND state IN ('ready', 'leased', 'dead')",
                                 [context.app])
        }
        let row = rows[0]
        return .json(QueueStats(ready: try row.decode("ready"), leased: try row.decode("leased"), retrying: try row.decode("retrying"),
                                dead: try row.decode("dead"), oldestReadyAgeMs: try row.decode("oldest_ready_age_ms")))
    }

    static func dead(_ context: RequestContext) throws -> Response {
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try list.integerPosition(kind: "dead")
        let jobs = try context.services.database.withConnection { connection in
            let rows = try connection.query("""
                SELECT \(JobPayload.columns) FROM jobs j JOIN messages m ON m.app = j.app AND m.id = j.message_id
                 WHERE j.app = $1 AND j.state = 'dead' AND ($2::bigint IS NULL OR j.id > $2)
                 ORDER BY j.id LIMIT $3
                """, [context.app, after, list.limit + 1])
            return try rows.map { try JobPayload(row: $0) }
        }
        let entries = jobs.map { (position: String($0.id), item: DeadJob(job: $0)) }
        return .json(list.page(entries, kind: "dead"))
    }

    static func requeue(_ context: RequestContext) throws -> Response {
        guard case .array(let values)? = try context.request.jsonObject()["ids"] else {
            throw HTTPError.badRequest("ids must be an array of job ids", field: "ids")
        }
        guard values.count <= 1000 else { throw HTTPError.invalidLimit(field: "ids", min: 0, max: 1000) }
        var ids: [Int64] = []
        for (index, value) in values.enumerated() { ids.append(try jobID(value, field: "ids[\(index)]")) }
        let rows = try context.services.database.withConnection { connection in
            try connection.query("""
                UPDATE jobs SET state = 'ready', attempt = 0, available_at = herald_now_ms(), last_error = NULL,
                                updated_at = herald_now_ms(),
                                -- a new id: a worker still holding the old one cannot ack or fail the new life
                                id = nextval('jobs_id_seq')
                 WHERE app = $1 AND id = ANY ($2::bigint[]) AND state = 'dead'
                """, [context.app, ids])
        }
        context.services.metrics.add(.jobsRequeued, rows.affectedRows)
        return .json(Requeued(requeued: rows.affectedRows))
    }
}

// MARK: Response bodies (SPEC §9)

/// `POST /v1/jobs/claim`: the claimed jobs, each written by `JobPayload`.
struct ClaimedJobs: JSONWritable {
    let jobs: [JobPayload]

    func write(to writer: inout JSONWriter) {
        writer.object { $0.field("jobs", array: jobs) }
    }
}

/// A job id on the wire: `j<number>`.
func wireJobID(_ id: Int64) -> String { "j\(id)" }

/// `POST /v1/jobs/ack`.
struct AckResult: JSONWritable {
    let acked: Int
    /// Jobs not acked: unknown, not leased, or leased with another attempt.
    let stale: [Int64]

    func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("acked", acked)
            body.field("stale") { $0.array(strings: stale.map(wireJobID)) }
        }
    }
}

/// `POST /v1/jobs/fail`.
struct FailResult: JSONWritable {
    let dead: Int
    let retrying: Int
    let stale: [Int64]

    func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("dead", dead)
            body.field("retrying", retrying)
            body.field("stale") { $0.array(strings: stale.map(wireJobID)) }
        }
    }
}

/// `GET /v1/jobs/stats`.
struct QueueStats: JSONWritable {
    let ready: Int
    let leased: Int
    let retrying: Int
    let dead: Int
    let oldestReadyAgeMs: Int

    func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("ready", ready)
            body.field("leased", leased)
            body.field("retrying", retrying)
            body.field("dead", dead)
            body.field("oldestReadyAgeMs", oldestReadyAgeMs)
        }
    }
}

/// `POST /v1/jobs/dead/requeue`.
struct Requeued: JSONWritable {
    let requeued: Int

    func write(to writer: inout JSONWriter) {
        writer.object { $0.field("requeued", requeued) }
    }
}
