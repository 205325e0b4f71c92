import HeraldDomain
import HeraldStore
import Dispatch
import HTTPServer
import Postgres
import Synchronization
import JSON

/// Long-poll claims (`waitSeconds`) wait here, not on a server thread: their connections are
/// suspended, and a loop on a thread of its own retries each claim when jobs come — ingest on this
/// instance wakes it, and `NotificationListener` does on NOTIFY herald_jobs (a statement that
/// added jobs on any instance: sql/functions/3_changes.sql; a release or retry: `JobQueue`) —
/// or when the next job of a waiting app becomes claimable (a retry's backoff ends, a lease
/// expires: read from the queue's indexes after each pass), answering when jobs come or the time
/// is up. Only while the listener has no connection does it retry every 250 ms.
package final class JobWaiter: Sendable {
    package struct Waiting: Sendable {
        package let app: String
        package let max: Int
        package let leaseSeconds: Int
        package let deadline: UInt64
        package let deferral: Deferral
    }

    package let database: PostgresPool
    package let metrics: Metrics
    package let gate: LongPollGate
    /// A claim stays registered from `wait` until it is answered, so jobs that come while a pass
    /// runs mark its app due for the next pass: never lost. Each app's claims are tried oldest first.
    private let state = Mutex(WaitingSet<Waiting>())
    private let loop = BackgroundLoop(label: "herald.jobs.wait")
    /// Set by `shutdown()`: a claim that comes later is answered at once, never left waiting.
    private let closed = Atomic<Bool>(false)
    /// Whether `NotificationListener` is connected (it sets this).
    package let listening = Atomic<Bool>(false)

    package init(database: PostgresPool, metrics: Metrics, gate: LongPollGate) {
        self.database = database
        self.metrics = metrics
        self.gate = gate
    }

    /// Claims waiting now.
    package var waitingCount: Int { state.withLock { $0.count } }

    /// Registers a claim to wait; it is answered at once if the waiter is stopping, and refused
    /// with `429 ERR_OVERLOADED` when the gate has no slot for it.
    package func wait(_ item: Waiting) throws(HTTPError) {
        if closed.load(ordering: .relaxed) {
            item.deferral.complete(Response.json(ClaimedJobs(jobs: [])))
            return
        }
        try gate.enter(app: item.app)
        state.withLock { $0.add(item, key: item.app) }   // tried once more now that it is registered
        loop.wake()
    }

    /// New jobs of `app` may exist (a NOTIFY herald_jobs with its app, a release, a retry).
    package func wake(app: String) {
        if state.withLock({ $0.markDue(CollectionOfOne(app)) }) { loop.wake() }
    }

    /// New jobs of any app may exist: look now.
    package func wake() {
        state.withLock { $0.markAllDue() }
        loop.wake()
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "job-waiter" }
    package var shutdownTimeoutSeconds: Double? { 10 }

    /// Tries the waiting claims until `shutdown()`, then answers whoever still waits. A claim's
    /// error is that claim's answer (503, 500), never the loop's end.
    package func run() {
        // When woken (new jobs, a new claim) or when the next job or deadline is due.
        loop.run(pass: { [self] in pass() }, drain: { [self] in
            // Answer whoever still waits, so that shutdown can drain.
            for id in state.withLock({ Array($0.items.keys) }) { finish(id, Response.json(ClaimedJobs(jobs: []))) }
        })
    }

    /// Asks `run()` to answer every waiting claim and return; claims that arrive afterwards do not wait.
    package func shutdown() {
        closed.store(true, ordering: .relaxed)
        loop.shutdown()
    }

    /// Answers a waiting claim (once) and frees its slot.
    private func finish(_ id: UInt64, _ response: Response) {
        guard let item = state.withLock({ $0.remove(id, key: \.app) }) else { return }
        gate.leave(app: item.app)
        item.deferral.complete(response)
    }

    /// Tries the waiting claims of the apps that may have jobs (all of them when the pass comes
    /// from a timer: a retry's backoff or a lease ended), oldest first; an app's first claim
    /// that finds nothing ends that app's turn (the others would find nothing either). Says how
    /// long to wait before the next pass.
    private func pass() -> BackgroundLoop.Next {
        let listening = self.listening.load(ordering: .relaxed)
        // a pass with nothing due comes from a timer (a backoff or a lease ended): every app
        let turns = state.withLock { state in
            let everything = state.nothingDue || !listening
            return state.takeDue(everything: everything)
        }
        for (_, claims) in turns {
            for (id, item) in claims {
                do {
                    let (count, response) = try JobsAPI.claimOnce(app: item.app, max: item.max, leaseSeconds: item.leaseSeconds,
                                                                  database: database, metrics: metrics)
                    if count > 0 {
                        finish(id, response)
                    } else {
                        break
                    }
                } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
                    finish(id, HTTPError.unavailable().response)
                } catch {
                    finish(id, HTTPError.internalError.response)
                }
            }
        }
        let now = monotonicNanoseconds()
        for id in state.withLock({ state in state.items.filter { $0.value.deadline <= now }.map(\.key) }) {
            finish(id, Response.json(ClaimedJobs(jobs: [])))
        }
        guard listening else { return .idle(seconds: 0.25) }
        let (deadline, apps) = state.withLock { ($0.items.values.map(\.deadline).min(), $0.keys) }
        guard let deadline else { return .idle(seconds: 30) }
        var seconds = Double(deadline > now ? deadline - now : 0) / 1_000_000_000
        // a retry's backoff or a lease may end first
        if let due = try? database.withConnection({ try JobQueue.nextDue(apps: apps, on: $0) }) { seconds = min(seconds, due) }
        return .idle(seconds: min(seconds + 0.001, 30))
    }
}
