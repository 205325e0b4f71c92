import Dispatch
import HTTPServer
import Postgres
import Synchronization
import JSON

/// Long-poll claims (`waitSeconds`) wait here, not on a server thread: their connections are
/// suspended, and a loop on a queue of its own retries each claim when jobs come — ingest on this
/// instance wakes it, and `NotificationListener` does on NOTIFY herald_jobs (a statement that
/// added jobs on any instance: sql/functions/3_changes.sql; a release or retry: `JobQueue`) —
/// or when the next job of a waiting app becomes claimable (a retry's backoff ends, a lease
/// expires: read from the queue's indexes after each pass), answering when jobs come or the time
/// is up. Only while the listener has no connection does it retry every 250 ms.
public final class JobWaiter: Sendable {
    struct Waiting: Sendable {
        let app: String
        let max: Int
        let leaseSeconds: Int
        let deadline: UInt64
        let deferral: Deferral
    }

    let database: PostgresPool
    let metrics: Metrics
    private let waiting = Mutex<[Waiting]>([])
    private let loop = BackgroundLoop(label: "herald.jobs.wait")
    /// Set by `stop()`: a claim that comes later is answered at once, never left waiting.
    private let closed = Atomic<Bool>(false)
    /// Whether `NotificationListener` is connected (it sets this).
    let listening = Atomic<Bool>(false)

    public init(database: PostgresPool, metrics: Metrics) {
        self.database = database
        self.metrics = metrics
    }

    /// Claims waiting now (one being tried is not counted while it is).
    public var waitingCount: Int { waiting.withLock { $0.count } }

    /// Adds a claim to wait; it is answered at once if the waiter is stopping.
    func wait(_ item: Waiting) {
        if closed.load(ordering: .relaxed) {
            item.deferral.complete(Response.json(ClaimedJobs(jobs: [])))
            return
        }
        waiting.withLock { $0.append(item) }
        loop.wake()
    }

    /// New jobs may exist: look now.
    public func wake() { loop.wake() }

    public func start() {
        closed.store(false, ordering: .relaxed)
        // When woken (new jobs, a new claim) or when the next job or deadline is due.
        loop.start(pass: { [self] in pass() }, drain: { [self] in
            // Answer whoever still waits, so that shutdown can drain.
            for item in waiting.withLock({ state in defer { state.removeAll() }; return state }) {
                item.deferral.complete(Response.json(ClaimedJobs(jobs: [])))
            }
        })
    }

    /// Answers every waiting claim and stops; claims that arrive afterwards do not wait.
    public func stop() {
        closed.store(true, ordering: .relaxed)
        loop.stop(timeout: 10)
    }

    /// Tries every waiting claim once; says how long to wait before the next pass.
    private func pass() -> BackgroundLoop.Next {
        let items = waiting.withLock { state in defer { state.removeAll() }; return state }
        var still: [Waiting] = []
        for item in items {
            do {
                let (count, response) = try JobsAPI.claimOnce(app: item.app, max: item.max, leaseSeconds: item.leaseSeconds,
                                                              database: database, metrics: metrics)
                if count > 0 || monotonicNanoseconds() >= item.deadline {
                    item.deferral.complete(response)
                } else {
                    still.append(item)
                }
            } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
                item.deferral.complete(HTTPError.unavailable().response)
            } catch {
                item.deferral.complete(HTTPError.internalError.response)
            }
        }
        if !still.isEmpty { waiting.withLock { $0.append(contentsOf: still) } }
        guard listening.load(ordering: .relaxed) else { return .idle(seconds: 0.25) }
        guard let deadline = still.map(\.deadline).min() else { return .idle(seconds: 30) }
        let now = monotonicNanoseconds()
        var seconds = Double(deadline > now ? deadline - now : 0) / 1_000_000_000
        if let due = try? nextDue(apps: Array(Set(still.map(\.app)))) { seconds = min(seconds, due) }
        return .idle(seconds: min(seconds + 0.001, 30))
    }

    /// Seconds until a job of one of `apps` becomes claimable without an insert: a retry whose
    /// backoff ends, or a lease that expires (two index probes per app); nil when none will.
    private func nextDue(apps: [String]) throws -> Double? {
        let rows = try database.withConnection { connection in
            try connection.query("""
                SELECT min(least(r.at, l.at)) - herald_now_ms()
                  FROM unnest($1::text[]) AS a(app)
                  LEFT JOIN LATERAL (SELECT j.available_at AS at FROM jobs j WHERE j.app = a.app AND j.state = 'ready'
                                      ORDER BY j.available_at LIMIT 1) r ON true
                  LEFT JOIN LATERAL (SELECT j.lease_until AS at FROM jobs j WHERE j.app = a.app AND j.state = 'leased'
                                      ORDER BY j.lease_until LIMIT 1) l ON true
                """, [apps])
        }
        guard let milliseconds = try rows.first?.decode(0, as: Int64?.self) else { return nil }
        return Double(max(milliseconds, 0)) / 1000
    }
}
