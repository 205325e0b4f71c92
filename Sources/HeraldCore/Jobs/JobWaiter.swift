import Dispatch
import HTTPServer
import Postgres
import Synchronization
import JSON

/// Long-poll claims (`waitSeconds`) wait here, not on a server thread: their connections are
/// suspended, and a loop on a queue of its own retries each claim when ingest reports new jobs
/// (and every 250 ms, for other instances' jobs and returning leases), answering when jobs come
/// or the time is up.
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
        // Every 250 ms or when woken (new jobs, a new claim); then tries every waiting claim.
        loop.start(pass: { [self] in
            pass()
            return .idle(seconds: 0.25)
        }, drain: { [self] in
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

    /// Tries every waiting claim once.
    private func pass() {
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
    }
}
