import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import Dispatch
import Synchronization
import JSON

/// `POST /v1/events` and `GET /v1/events/rejected` (SPEC §4).
package enum IngestAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let database: PostgresPool
        package let delivery: any DeliveryControl
        package let fanout: FanoutWorker
        package let inboxRefresher: InboxRefresher
        package let ingestCombiner: IngestCombiner
        package let jobWaiter: JobWaiter
        package let logger: Logger
        package let metrics: Metrics

        package init(_ all: Dependencies) {
            database = all.database
            delivery = all.delivery
            fanout = all.fanout
            inboxRefresher = all.inboxRefresher
            ingestCombiner = all.ingestCombiner
            jobWaiter = all.jobWaiter
            logger = all.logger
            metrics = all.metrics
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>, limiter: InFlightLimiter) {
        router.add(.post, "/v1/events", Route(access: .ingest, accepts: EventParser.mediaTypes) { (context: Context) in
            try ingest(context, limiter: limiter)
        })
        router.add(.get, "/v1/events/rejected", Route(access: .server, handler: listRejected))
    }

    /// Parses the events here, then hands them to their lane (`IngestCombiner`) and suspends the
    /// connection until their round is committed: no server thread waits for a round. A slot of
    /// `limiter` is held from the hand-over to the answer.
    package static func ingest(_ context: Context, limiter: InFlightLimiter) throws -> Response {
        let request = context.request
        let items = try EventParser.parse(body: request.body, mediaType: request.mediaType, header: { request.header($0) })
        let services = context.services
        guard let deferral = request.deferral else {
            return try limiter.run { try response(to: items, applied: services.ingestCombiner.apply(items, app: context.app), context: context) }
        }
        try limiter.acquire()
        services.ingestCombiner.submit(items, app: context.app) { result in
            defer { limiter.release() }
            do {
                deferral.complete(try response(to: items, applied: result.get(), context: context))
            } catch {
                deferral.complete(RequestPipeline.errorResponse(error, logger: services.logger, requestID: request.id, pattern: "/v1/events"))
            }
        }
        return .deferred
    }

    /// The answer to events applied: each one's outcome; the workers that wait for what they produced are woken.
    private static func response(to items: [EventParser.Item], applied: IngestCombiner.Result, context: Context) -> Response {
        let services = context.services
        let (outcomes, jobsProduced) = (applied.outcomes, applied.jobsProduced)
        if outcomes.contains(where: { $0.status == .accepted }) {
            services.fanout.wake()
            services.jobWaiter.wake(app: context.app)
            services.delivery.wake(app: context.app)
            services.inboxRefresher.wake()
        }
        let result = IngestResult(outcomes: outcomes)
        services.metrics.add(.eventsAccepted, result.accepted)
        services.metrics.add(.eventsDuplicate, result.duplicates)
        services.metrics.add(.eventsRejected, result.rejected)
        services.metrics.add(.jobsProduced, jobsProduced)
        if applied.roundTrips > 0 {
            services.metrics.add(.ingestRounds, 1)
            services.metrics.add(.ingestRoundTrips, applied.roundTrips)
        }
        var response = Response.json(result)
        // The events' traces (their valid traceparent attributes), so the bus's trace finds this request.
        let traces = EventParser.traceparents(items)
        if !traces.isEmpty { response.logFields["eventTraceparents"] = .array(traces.map(JSONValue.string)) }
        return response
    }

    /// Rejected events, newest first, built as JSON by PostgreSQL.
    package static func listRejected(_ context: Context) throws -> Response {
        let list = try ListParameters(context.request, defaultLimit: 100)
        let before = try list.integerPosition(kind: "rejected")
        let rows = try context.services.database.withConnection {
            try IngestStore.rejected(app: context.app, before: before, limit: list.limit + 1, on: $0)
        }
        return try list.page(rows, kind: "rejected")
    }
}

/// Bounds how many requests of one kind run at once. One that finds every slot taken waits for
/// one, up to `queueMilliseconds`, so a burst queues briefly instead of being refused while the
/// database keeps up; only `maxWaiting` wait at once (the other threads stay free for other
/// routes), and past either bound the answer is `429 ERR_OVERLOADED` + `Retry-After`.
package final class InFlightLimiter: Sendable {
    package let limit: Int
    package let maxWaiting: Int
    package let queueMilliseconds: Int
    private let slots: DispatchSemaphore
    private let waiting = Atomic<Int>(0)

    package init(limit: Int, maxWaiting: Int = 0, queueMilliseconds: Int = 0) {
        self.limit = max(1, limit)
        self.maxWaiting = max(0, maxWaiting)
        self.queueMilliseconds = max(0, queueMilliseconds)
        slots = DispatchSemaphore(value: self.limit)
    }

    package func run<T>(_ body: () throws -> T) throws -> T {
        try acquire()
        defer { release() }
        return try body()
    }

    /// Takes a slot, waiting as `run` does; every slot taken is given back with `release()`.
    package func acquire() throws(HTTPError) {
        if slots.wait(timeout: .now()) == .timedOut {
            let queued = waiting.add(1, ordering: .relaxed).newValue
            defer { waiting.subtract(1, ordering: .relaxed) }
            guard queued <= maxWaiting, queueMilliseconds > 0,
                  slots.wait(timeout: .now() + .milliseconds(queueMilliseconds)) == .success else {
                throw HTTPError.overloaded()
            }
        }
    }

    /// Gives back a slot `acquire()` took.
    package func release() {
        slots.signal()
    }
}

/// `POST /v1/events`: the counts, and each event's outcome in the order sent.
package struct IngestResult: JSONWritable {
    package let outcomes: [IngestStore.Outcome]
    package let accepted: Int, duplicates: Int, rejected: Int

    package init(outcomes: [IngestStore.Outcome]) {
        self.outcomes = outcomes
        accepted = outcomes.count { $0.status == .accepted }
        duplicates = outcomes.count { $0.status == .duplicate }
        rejected = outcomes.count { $0.status == .rejected }
    }

    package func write(to writer: inout JSONWriter) {
        writer.object { body in
            body.field("accepted", accepted)
            body.field("duplicates", duplicates)
            body.field("rejected", rejected)
            body.field("results") { results in
                results.array { list in
                    for outcome in outcomes {
                        list.object { item in
                            item.field("id", outcome.id)
                            item.field("source", outcome.source)
                            item.field("status", outcome.status.rawValue)
                            if let error = outcome.error { item.field("error", error.errorJSON) }
                        }
                    }
                }
            }
        }
    }
}
