import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import Synchronization

/// Long polls of the change feed (`waitSeconds`) wait here, not on a server thread. A loop of
/// its own reads a waiting user's feed again when `NotificationListener` hears that user's
/// changes commit (NOTIFY herald_changes, from any instance), and answers when there are
/// changes or the time is up. Nothing polls the table: without a notification a waiting feed
/// is read once when it starts waiting (closing the gap between its first read and its
/// registration) and again only if the listener lost its connection (then every second, until
/// it is back).
package final class ChangeWaiter: Sendable {
    package struct Waiting: Sendable {
        package let app: String
        package let key: String
        package let deadline: UInt64
        package let deferral: Deferral
        /// The page when there are changes now, else nil.
        package let attempt: @Sendable (PostgresConnection) throws -> Response?
        /// The answer when the time is up.
        package let empty: @Sendable () -> Response
    }

    package let database: PostgresPool
    package let gate: LongPollGate
    /// A feed stays registered from `wait` until it is answered, so a notification that comes
    /// while a pass reads it (or reads others) marks it due for the next pass: never lost.
    private let state = Mutex(WaitingSet<Waiting>())
    private let loop = BackgroundLoop(label: "herald.changes.wait")
    private let closed = Atomic<Bool>(false)
    /// Whether the listener is connected (set by `NotificationListener`); without it the
    /// waiting feeds are read every second.
    package let listening = Atomic<Bool>(false)

    package init(database: PostgresPool, gate: LongPollGate) {
        self.database = database
        self.gate = gate
    }

    package static func key(app: String, uid: String) -> String { app + "\u{1F}" + uid }

    /// Feeds waiting now.
    package var waitingCount: Int { state.withLock { $0.count } }

    /// Registers a feed to wait; `429 ERR_OVERLOADED` when the gate has no slot for it.
    package func wait(_ item: Waiting) throws(HTTPError) {
        if closed.load(ordering: .relaxed) {
            item.deferral.complete(item.empty())
            return
        }
        try gate.enter(app: item.app, user: item.key)
        state.withLock { $0.add(item, key: item.key) }   // read once more now that it is registered
        loop.wake()
    }

    /// These users' feeds changed (a notification's payload).
    package func changed(_ keys: some Sequence<String>) {
        if state.withLock({ $0.markDue(keys) }) { loop.wake() }
    }

    /// Every waiting feed may have changed (the listener connected again).
    package func changedAll() {
        state.withLock { $0.markAllDue() }
        loop.wake()
    }

    /// The service's name (logs, `HERALD_TEST_END_SERVICE`).
    package var name: String { "change-waiter" }
    package var shutdownTimeoutSeconds: Double? { 10 }

    /// Reads the due feeds until `shutdown()`, then answers whoever still waits. A feed's error
    /// is that feed's answer (503, 500), never the loop's end.
    package func run() {
        loop.run(pass: { [self] in pass() }, drain: { [self] in
            for (id, item) in state.withLock({ Array($0.items) }) { finish(id, item.empty()) }
        })
    }

    /// Asks `run()` to answer every waiting feed and return; feeds that arrive afterwards do not wait.
    package func shutdown() {
        closed.store(true, ordering: .relaxed)
        loop.shutdown()
    }

    /// Answers a waiting feed (once: a feed already answered is left alone) and frees its slot.
    private func finish(_ id: UInt64, _ response: Response) {
        guard let item = state.withLock({ $0.remove(id, key: \.key) }) else { return }
        gate.leave(app: item.app, user: item.key)
        item.deferral.complete(response)
    }

    private func pass() -> BackgroundLoop.Next {
        let listening = self.listening.load(ordering: .relaxed)
        // The due feeds are taken, not the registrations: a change noted from here on is due
        // again at the next pass.
        let due = state.withLock { $0.takeDue(everything: !listening) }.flatMap(\.requests)
        for (id, item) in due {
            do {
                if let response = try database.withConnection({ try item.attempt($0) }) { finish(id, response) }
            } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
                finish(id, HTTPError.unavailable().response)
            } catch let error as HTTPError {
                finish(id, error.response)
            } catch {
                finish(id, HTTPError.internalError.response)
            }
        }
        let now = monotonicNanoseconds()
        let expired = state.withLock { state in state.items.filter { $0.value.deadline <= now } }
        for (id, item) in expired { finish(id, item.empty()) }
        guard let nearest = state.withLock({ $0.items.values.map(\.deadline).min() }) else { return .idle(seconds: 30) }
        let seconds = Double(nearest > now ? nearest - now : 0) / 1_000_000_000
        return .idle(seconds: listening ? min(seconds + 0.001, 30) : min(seconds + 0.001, 1))
    }
}
