import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §9: the jobs API for push senders (worker and server roles).
package enum JobsAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let database: PostgresPool
        package let jobWaiter: JobWaiter
        package let metrics: Metrics

        package init(_ all: Dependencies) {
            database = all.database
            jobWaiter = all.jobWaiter
            metrics = all.metrics
        }
    }

    package typealias Context = RequestContext<Services>


    package static func register(in router: inout Router<Route>) {
        router.add(.post, "/v1/jobs/claim", Route(access: .worker, accepts: Route.json, handler: claim))
        router.add(.post, "/v1/jobs/ack", Route(access: .worker, accepts: Route.json, handler: ack))
        router.add(.post, "/v1/jobs/fail", Route(access: .worker, accepts: Route.json, handler: fail))
        router.add(.get, "/v1/jobs/stats", Route(access: .worker, handler: stats))
        router.add(.get, "/v1/jobs/dead", Route(access: .worker, handler: dead))
        router.add(.post, "/v1/jobs/dead/requeue", Route(access: .worker, accepts: Route.json, handler: requeue))
    }

    package static func integer(_ object: [String: JSONValue], _ key: String, default value: Int, range: ClosedRange<Int>) throws(HTTPError) -> Int {
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
    package static func jobID(_ value: JSONValue?, field: String) throws(HTTPError) -> Int64 {
        guard case .string(let text)? = value, text.hasPrefix("j"), let id = Int64(text.dropFirst()), id > 0 else {
            throw HTTPError.badRequest("\(field) must be a job id", field: field)
        }
        return id
    }

    package static func claim(_ context: Context) throws -> Response {
        let object = try context.request.jsonObject()
        let max = try integer(object, "max", default: 100, range: 1...1000)
        let lease = try integer(object, "leaseSeconds", default: 30, range: 1...3600)
        let wait = try integer(object, "waitSeconds", default: 0, range: 0...30)
        let (count, response) = try claimOnce(app: context.app, max: max, leaseSeconds: lease, database: context.services.database,
                                              metrics: context.services.metrics)
        guard count == 0, wait > 0, let deferral = context.request.deferral else { return response }
        // Nothing yet: the connection waits without a server thread until jobs come or time is up.
        try context.services.jobWaiter.wait(.init(app: context.app, max: max, leaseSeconds: lease,
                                              deadline: monotonicNanoseconds() + UInt64(wait) * 1_000_000_000,
                                              deferral: deferral))
        return .deferred
    }

    /// One claim: returns expired leases to the queue, then leases up to `max` ready jobs.
    package static func claimOnce(app: String, max: Int, leaseSeconds: Int, database: PostgresPool,
                          metrics: Metrics) throws -> (Int, Response) {
        let jobs = try database.withTransaction { try JobQueue.claim(app: app, max: max, leaseSeconds: leaseSeconds, on: $0) }
        metrics.add(.jobsClaimed, jobs.count)
        return (jobs.count, .json(ClaimedJobs(jobs: jobs)))
    }

    /// Reads `{"jobs": [{"id", "attempt", …}]}`.
    package static func entries(_ object: [String: JSONValue]) throws(HTTPError) -> [(Int64, Int, [String: JSONValue])] {
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

    package static func ack(_ context: Context) throws -> Response {
        let items = try entries(try context.request.jsonObject())
        var acks: [JobQueue.Ack] = []
        for (index, item) in items.enumerated() {
            var ack = JobQueue.Ack(id: item.0, attempt: item.1)
            // `invalidDevices`: the push service refused these devices' tokens (SPEC §13.1).
            if let value = item.2["invalidDevices"], value != .null {
                guard case .array(let ids) = value, ids.count <= DeviceStore.maxPerUser else {
                    throw HTTPError.badRequest("jobs[\(index)].invalidDevices must be a list of device ids", field: "jobs[\(index)].invalidDevices")
                }
                for (position, id) in ids.enumerated() {
                    guard case .string(let text) = id, Identifier.isValid(text) else {
                        throw HTTPError.badRequest("jobs[\(index)].invalidDevices[\(position)] must be a device id",
                                                   field: "jobs[\(index)].invalidDevices[\(position)]")
                    }
                    ack.invalidDevices.append(text)
                }
            }
            acks.append(ack)
        }
        let acked = try context.services.database.withTransaction { try JobQueue.ack(app: context.app, acks, on: $0) }
        context.services.metrics.add(.jobsAcked, acked.count)
        return .json(AckResult(acked: acked.count, stale: items.map(\.0).filter { !acked.contains($0) }))
    }

    package static func fail(_ context: Context) throws -> Response {
        let items = try entries(try context.request.jsonObject())
        var failures: [JobQueue.Failure] = []
        for (index, item) in items.enumerated() {
            let (id, attempt, entry) = item
            var retryable = true
            if let value = entry["retryable"], value != .null {
                guard case .bool(let flag) = value else {
                    throw HTTPError.badRequest("jobs[\(index)].retryable must be a boolean", field: "jobs[\(index)].retryable")
                }
                retryable = flag
            }
            var delay: Int64?
            if let value = entry["retryAfterSeconds"], value != .null {
                guard case .int(let seconds) = value, (0...86_400).contains(seconds) else {
                    throw HTTPError.badRequest("jobs[\(index)].retryAfterSeconds must be 0-86400", field: "jobs[\(index)].retryAfterSeconds")
                }
                delay = Int64(seconds) * 1000
            }
            var message = ""
            if case .string(let text)? = entry["error"] { message = text }
            failures.append(JobQueue.Failure(id: id, attempt: attempt, error: message, retryable: retryable, retryAfterMs: delay))
        }
        let states = try context.services.database.withTransaction { try JobQueue.fail(app: context.app, failures, on: $0) }
        let deadCount = states.values.filter { $0 == .dead }.count
        let retrying = states.count - deadCount
        context.services.metrics.add(.jobsRetried, retrying)
        context.services.metrics.add(.jobsDead, deadCount)
        return .json(FailResult(dead: deadCount, retrying: retrying, stale: items.map(\.0).filter { states[$0] == nil }))
    }

    package static func stats(_ context: Context) throws -> Response {
        let row = try context.services.database.withConnection { try JobQueue.counts(app: context.app, on: $0) }
        return .json(QueueStats(ready: try row.decode("ready"), leased: try row.decode("leased"), retrying: try row.decode("retrying"),
                                dead: try row.decode("dead"), oldestReadyAgeMs: try row.decode("oldest_ready_age_ms")))
    }

    package static func dead(_ context: Context) throws -> Response {
        let list = try ListParameters(context.request, defaultLimit: 100)
        let after = try list.integerPosition(kind: "dead")
        let jobs = try context.services.database.withConnection {
            try JobQueue.dead(app: context.app, after: after, limit: list.limit + 1, on: $0)
        }
        let entries = jobs.map { (position: String($0.id), item: DeadJob(job: $0)) }
        return .json(list.page(entries, kind: "dead"))
    }

    package static func requeue(_ context: Context) throws -> Response {
        guard case .array(let values)? = try context.request.jsonObject()["ids"] else {
            throw HTTPError.badRequest("ids must be an array of job ids", field: "ids")
        }
        guard values.count <= 1000 else { throw HTTPError.invalidLimit(field: "ids", min: 0, max: 1000) }
        var ids: [Int64] = []
        for (index, value) in values.enumerated() { ids.append(try jobID(value, field: "ids[\(index)]")) }
        let requeued = try context.services.database.withConnection { try JobQueue.requeue(app: context.app, ids: ids, on: $0) }
        context.services.metrics.add(.jobsRequeued, requeued)
        return .json(Requeued(requeued: requeued))
    }
}

// MARK: Response bodies (SPEC §9)

/// `POST /v1/jobs/claim`: the claimed jobs, each written by `JobPayload`.
package struct ClaimedJobs: JSONWritable {
    package let jobs: [JobPayload]

    package func write(to writer: inout JSONWriter) {
        writer.object { $0.field("jobs") { JobPayload.write(jobs, to: &$0) } }
    }
}


/// `POST /v1/jobs/ack`.
package struct AckResult: JSONWritable {
    package let acked: Int
    /// Jobs not acked: unknown, not leased, or leased with another attempt.
    package let stale: [Int64]

    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("acked", acked)
            body.field("stale") { $0.array(strings: stale.map(wireJobID)) }
        }
    }
}

/// `POST /v1/jobs/fail`.
package struct FailResult: JSONWritable {
    package let dead: Int
    package let retrying: Int
    package let stale: [Int64]

    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("dead", dead)
            body.field("retrying", retrying)
            body.field("stale") { $0.array(strings: stale.map(wireJobID)) }
        }
    }
}

/// `GET /v1/jobs/stats`.
package struct QueueStats: JSONWritable {
    package let ready: Int
    package let leased: Int
    package let retrying: Int
    package let dead: Int
    package let oldestReadyAgeMs: Int

    package func write(to writer: inout JSONWriter) {
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
package struct Requeued: JSONWritable {
    package let requeued: Int

    package func write(to writer: inout JSONWriter) {
        writer.object { $0.field("requeued", requeued) }
    }
}
