import HeraldDomain
import FoundationEssentials
import Glibc
import Locking
import Postgres
import Synchronization

/// This process's counters and latency histograms, rendered in the Prometheus text format
/// (version 0.0.4) by `GET /metrics`. Counters count since the process started, as Prometheus
/// expects; gauges about the queue are read from the database at scrape time.
///
/// Labels are bounded: a route is its pattern (`/v1/users/{uid}/threads`), never the raw path,
/// and nothing carries an app id, a user id or a secret.
package final class Metrics: Sendable {
    /// Upper bounds of the latency buckets, in seconds (long polls can take up to 30 s).
    package static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    package struct RouteKey: Hashable {
        package let method: String
        package let route: String
    }

    package struct RouteStats {
        package var statuses: [Int: Int] = [:]
        /// Non-cumulative counts per bucket; the last slot is +Inf.
        package var buckets = [Int](repeating: 0, count: Metrics.bucketBounds.count + 1)
        package var sum: Double = 0
        package var count = 0
    }

    /// Counters of things Herald does, by name and label value.
    package enum Counter: Int, CaseIterable, Sendable {
        case eventsAccepted, eventsDuplicate, eventsRejected
        case ingestRounds, ingestRoundTrips
        case jobsProduced, jobsClaimed, jobsAcked, jobsRetried, jobsDead, jobsRequeued
        case deliveryClaims
    }

    /// Built-in delivery (SPEC §13.3): attempts by outcome and status class, their durations,
    /// and the requests in flight.
    package struct DeliveryStats {
        package var attempts: [String: Int] = [:]   // "platform|outcome|status"
        package var durations: [String: RouteStats] = [:]   // by platform
        package var inFlight = 0
    }

    private let routes = Lock<[RouteKey: RouteStats]>([:])
    private let delivery = Lock(DeliveryStats())
    private let counters = Lock<[Int]>(Array(repeating: 0, count: Counter.allCases.count))
    private let startedAt = currentTimeMilliseconds()

    package init() {}

    /// Records one answered request.
    package func observe(method: String, route: String, status: Int, seconds: Double) {
        let bucket = Self.bucket(seconds)
        routes.withLock { routes in
            routes[RouteKey(method: method, route: route), default: RouteStats()].record(status: status, bucket: bucket, seconds: seconds)
        }
    }

    /// Adds `amount` to a counter.
    package func add(_ counter: Counter, _ amount: Int) {
        guard amount != 0 else { return }
        counters.withLock { $0[counter.rawValue] += amount }
    }

    package func deliveryStarted() { delivery.withLock { $0.inFlight += 1 } }

    /// A request ended. `platform`: the device platform of a direct push (SPEC §13.4); empty
    /// for the webhook and gorush modes.
    package func deliveryFinished(platform: String, seconds: Double) {
        let bucket = Self.bucket(seconds)
        delivery.withLock { stats in
            stats.inFlight -= 1
            stats.durations[platform, default: RouteStats()].buckets[bucket] += 1
            stats.durations[platform, default: RouteStats()].sum += seconds
            stats.durations[platform, default: RouteStats()].count += 1
        }
    }

    /// An attempt's outcome by name: a direct push's for its device (`sent`, `removed`,
    /// `refused`, `renew`, `retry`, `failed`, `no_credentials`), or a job's.
    package func deliveryAttempt(platform: String, outcome: String, status: String) {
        delivery.withLock { $0.attempts[platform + "|" + outcome + "|" + status, default: 0] += 1 }
    }

    /// One histogram's series: cumulative buckets, `+Inf`, `_sum` and `_count`, with `labels`
    /// (`name="value",…`, or empty) on each.
    package static func histogram(_ out: inout String, _ name: String, labels: String, _ stats: RouteStats) {
        let prefix = labels.isEmpty ? "" : labels + ","
        var cumulative = 0
        for (index, bound) in bucketBounds.enumerated() {
            cumulative += stats.buckets[index]
            out += "\(name)_bucket{\(prefix)le=\"\(format(bound))\"} \(cumulative)\n"
        }
        cumulative += stats.buckets[bucketBounds.count]
        out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(cumulative)\n"
        let braces = labels.isEmpty ? "" : "{\(labels)}"
        out += "\(name)_sum\(braces) \(format(stats.sum))\n"
        out += "\(name)_count\(braces) \(stats.count)\n"
    }

    /// `,platform="apns"` for a direct push's series; nothing for the webhook and gorush modes,
    /// whose series keep SPEC §13.3's labels.
    package static func platformLabel(_ platform: Substring) -> String {
        platform.isEmpty ? "" : ",platform=\"\(platform)\""
    }

    package static func bucket(_ seconds: Double) -> Int {
        for (index, bound) in bucketBounds.enumerated() where seconds <= bound { return index }
        return bucketBounds.count
    }

    /// The value of a counter.
    package func value(_ counter: Counter) -> Int {
        counters.withLock { $0[counter.rawValue] }
    }

    /// Queue gauges read at scrape time; nil when the database did not answer.
    package struct QueueState {
        package var ready = 0, leased = 0, retrying = 0, dead = 0
        package var oldestReadyAgeMs = 0
        package var fanoutTasks = 0
    }

    package static func readQueue(_ database: PostgresPool) -> QueueState? {
        try? database.withConnection { connection in
            let rows = try connection.query("""
                SELECT q.*, (SELECT count(*) FROM fanout_tasks WHERE NOT done) AS fanout_tasks
                  FROM (\(JobQueue.counts(app: nil))) q
                """)
            let row = rows[0]
            return QueueState(ready: try row.decode("ready"), leased: try row.decode("leased"), retrying: try row.decode("retrying"), dead: try row.decode("dead"),
                              oldestReadyAgeMs: try row.decode("oldest_ready_age_ms"), fanoutTasks: try row.decode("fanout_tasks"))
        }
    }

    /// What `render` reads besides the counters: the pools, the long-poll waiters.
    package struct Gauges: Sendable {
        /// The requests' pool (also read for the queue gauges) and built-in delivery's.
        package var pools: [(name: String, pool: PostgresPool)]
        package var claimsWaiting = 0
        package var feedsWaiting = 0
        package var longPollsMax = 0

        package init(pools: [(name: String, pool: PostgresPool)]) {
            self.pools = pools
        }
    }

    /// The exposition text.
    package func render(_ gauges: Gauges) -> String {
        var out = ""
        out.reserveCapacity(8192)
        header(&out, "herald_build_info", "gauge", "1, labelled with the running binary's version.")
        out += "herald_build_info{version=\"\(Self.escape(HeraldVersion.current))\"} 1\n"
        let snapshot = routes.withLock { $0 }
        let keys = snapshot.keys.sorted { ($0.route, $0.method) < ($1.route, $1.method) }

        header(&out, "herald_http_requests_total", "counter", "HTTP requests answered, by method, route pattern and status.")
        for key in keys {
            let stats = snapshot[key]!
            for status in stats.statuses.keys.sorted() {
                out += "herald_http_requests_total{method=\"\(key.method)\",route=\"\(Self.escape(key.route))\",status=\"\(status)\"} \(stats.statuses[status]!)\n"
            }
        }

        header(&out, "herald_http_request_duration_seconds", "histogram",
               "Time from the request's arrival to its answer, by method and route pattern.")
        for key in keys {
            let stats = snapshot[key]!
            Self.histogram(&out, "herald_http_request_duration_seconds", labels: "method=\"\(key.method)\",route=\"\(Self.escape(key.route))\"",
                           stats)
        }

        header(&out, "herald_events_total", "counter", "Ingested events, by result.")
        out += "herald_events_total{result=\"accepted\"} \(value(.eventsAccepted))\n"
        out += "herald_events_total{result=\"duplicate\"} \(value(.eventsDuplicate))\n"
        out += "herald_events_total{result=\"rejected\"} \(value(.eventsRejected))\n"

        header(&out, "herald_ingest_rounds_total", "counter",
               "Ingest rounds (transactions of group commit, one or more requests' events) committed by this process.")
        out += "herald_ingest_rounds_total \(value(.ingestRounds))\n"
        header(&out, "herald_ingest_round_trips_total", "counter",
               "Round trips to PostgreSQL made by those rounds (a pipeline of statements is one): three for a round of new messages, one more when some of its threads were busy.")
        out += "herald_ingest_round_trips_total \(value(.ingestRoundTrips))\n"

        header(&out, "herald_jobs_produced_total", "counter", "Push jobs committed by this process (ingest and large-group fan-out).")
        out += "herald_jobs_produced_total \(value(.jobsProduced))\n"
        header(&out, "herald_jobs_claimed_total", "counter", "Jobs leased to workers.")
        out += "herald_jobs_claimed_total \(value(.jobsClaimed))\n"
        header(&out, "herald_jobs_acked_total", "counter", "Jobs acknowledged by workers.")
        out += "herald_jobs_acked_total \(value(.jobsAcked))\n"
        header(&out, "herald_jobs_failed_total", "counter", "Job failures reported by workers, by outcome.")
        out += "herald_jobs_failed_total{outcome=\"retry\"} \(value(.jobsRetried))\n"
        out += "herald_jobs_failed_total{outcome=\"dead\"} \(value(.jobsDead))\n"
        header(&out, "herald_jobs_requeued_total", "counter", "Dead jobs put back in the queue.")
        out += "herald_jobs_requeued_total \(value(.jobsRequeued))\n"

        header(&out, "herald_delivery_claims_total", "counter",
               "Claims made by built-in delivery's deliverers (one per app that delivers), whether or not they found jobs.")
        out += "herald_delivery_claims_total \(value(.deliveryClaims))\n"
        let deliveryStats = delivery.withLock { $0 }
        header(&out, "herald_delivery_attempts_total", "counter",
               "Built-in delivery requests, by outcome "
               + "(a job's: delivered, retry, dead; a direct push's: sent, removed, refused, renew, retry, failed, no_credentials) "
               + "and status class (2xx…5xx, timeout, error, none); a direct push's also by its device's platform.")
        for key in deliveryStats.attempts.keys.sorted() {
            let parts = key.split(separator: "|", omittingEmptySubsequences: false)
            out += "herald_delivery_attempts_total{outcome=\"\(parts[1])\",status=\"\(parts[2])\"\(Self.platformLabel(parts[0]))} "
                + "\(deliveryStats.attempts[key]!)\n"
        }
        header(&out, "herald_delivery_duration_seconds", "histogram",
               "Time from a delivery request's start to its answer or failure (direct pushes by platform).")
        for platform in deliveryStats.durations.keys.sorted() {
            Self.histogram(&out, "herald_delivery_duration_seconds", labels: platform.isEmpty ? "" : "platform=\"\(platform)\"",
                           deliveryStats.durations[platform]!)
        }
        header(&out, "herald_delivery_in_flight", "gauge", "Built-in delivery requests in flight now.")
        out += "herald_delivery_in_flight \(deliveryStats.inFlight)\n"

        let queue = gauges.pools.first.flatMap { Self.readQueue($0.pool) }
        header(&out, "herald_database_up", "gauge", "1 when the database answered this scrape's queue query.")
        out += "herald_database_up \(queue == nil ? 0 : 1)\n"
        if let queue {
            header(&out, "herald_jobs_queue_depth", "gauge", "Jobs in the queue of every app, by state (retrying = waiting for its backoff).")
            out += "herald_jobs_queue_depth{state=\"ready\"} \(queue.ready)\n"
            out += "herald_jobs_queue_depth{state=\"leased\"} \(queue.leased)\n"
            out += "herald_jobs_queue_depth{state=\"retrying\"} \(queue.retrying)\n"
            out += "herald_jobs_queue_depth{state=\"dead\"} \(queue.dead)\n"
            header(&out, "herald_jobs_oldest_ready_age_seconds", "gauge", "Age of the oldest job ready to be claimed (0 when none).")
            out += "herald_jobs_oldest_ready_age_seconds \(Self.format(Double(queue.oldestReadyAgeMs) / 1000))\n"
            header(&out, "herald_fanout_tasks_pending", "gauge", "Large-group fan-out tasks not finished.")
            out += "herald_fanout_tasks_pending \(queue.fanoutTasks)\n"
        }

        // A limit and a usage are two metrics (not one with a state label), so that
        // in_use / max is a plain division; pool="request" or "delivery".
        header(&out, "herald_db_pool_connections_max", "gauge", "Database pool size, by pool (request, delivery).")
        for (name, pool) in gauges.pools { out += "herald_db_pool_connections_max{pool=\"\(name)\"} \(pool.configuration.size)\n" }
        header(&out, "herald_db_pool_connections_in_use", "gauge", "Database connections in use now, by pool.")
        for (name, pool) in gauges.pools { out += "herald_db_pool_connections_in_use{pool=\"\(name)\"} \(pool.inUse)\n" }
        header(&out, "herald_db_pool_waiting", "gauge", "Callers waiting for a database connection now, by pool.")
        for (name, pool) in gauges.pools { out += "herald_db_pool_waiting{pool=\"\(name)\"} \(pool.waiting)\n" }

        header(&out, "herald_long_polls_waiting", "gauge", "Long polls waiting now, by kind (claim: jobs claim with waitSeconds; feed: change feed).")
        out += "herald_long_polls_waiting{kind=\"claim\"} \(gauges.claimsWaiting)\n"
        out += "herald_long_polls_waiting{kind=\"feed\"} \(gauges.feedsWaiting)\n"
        header(&out, "herald_long_polls_max", "gauge", "Long polls allowed to wait at once (HERALD_MAX_LONG_POLLS).")
        out += "herald_long_polls_max \(gauges.longPollsMax)\n"

        header(&out, "process_resident_memory_bytes", "gauge", "Resident memory of the Herald process.")
        out += "process_resident_memory_bytes \(Self.residentBytes())\n"
        header(&out, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.")
        out += "process_start_time_seconds \(Self.format(Double(startedAt) / 1000))\n"
        return out
    }

    private func header(_ out: inout String, _ name: String, _ type: String, _ help: String) {
        out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// Label values escape backslash, double quote and line feed.
    package static func escape(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    /// A sample value: integers without a fraction, others as Swift prints doubles.
    package static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return String(value)
    }

    /// Resident set size from /proc/self/statm (pages × page size), 0 where unavailable.
    package static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

extension Metrics.RouteStats {
    package mutating func record(status: Int, bucket: Int, seconds: Double) {
        statuses[status, default: 0] += 1
        buckets[bucket] += 1
        sum += seconds
        count += 1
    }
}
