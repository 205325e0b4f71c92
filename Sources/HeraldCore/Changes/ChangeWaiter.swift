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
public final class ChangeWaiter: Sendable {
    struct Waiting: Sendable {
        let key: String
        let deadline: UInt64
        let deferral: Deferral
        /// The page when there are changes now, else nil.
        let attempt: @Sendable (PostgresConnection) throws -> Response?
        /// The answer when the time is up.
        let empty: @Sendable () -> Response
    }

    private struct State {
        var waiting: [Waiting] = []
        /// Keys ("app<US>uid") whose feeds changed since the last pass.
        var due: Set<String> = []
        var allDue = false
    }

    let database: PostgresPool
    private let state = Mutex(State())
    private let loop = BackgroundLoop(label: "herald.changes.wait")
    private let closed = Atomic<Bool>(false)
    /// Whether the listener is connected (set by `NotificationListener`); without it the
    /// waiting feeds are read every second.
    let listening = Atomic<Bool>(false)

    public init(database: PostgresPool) {
        self.database = database
    }

    static func key(app: String, uid: String) -> String { app + "\u{1F}" + uid }

    /// Feeds waiting now.
    public var waitingCount: Int { state.withLock { $0.waiting.count } }

    func wait(_ item: Waiting) {
        if closed.load(ordering: .relaxed) {
            item.deferral.complete(item.empty())
            return
        }
        state.withLock { state in
            state.waiting.append(item)
            state.due.insert(item.key)   // read once more now that it is registered
        }
        loop.wake()
    }

    /// These users' feeds changed (a notification's payload).
    func changed(_ keys: some Sequence<String>) {
        let any = state.withLock { state -> Bool in
            guard !state.waiting.isEmpty else { return false }
            state.due.formUnion(keys)
            return true
        }
        if any { loop.wake() }
    }

    /// Every waiting feed may have changed (the listener connected again).
    func changedAll() {
        state.withLock { $0.allDue = true }
        loop.wake()
    }

    public func start() {
        closed.store(false, ordering: .relaxed)
        loop.start(pass: { [self] in pass() }, drain: { [self] in
            for item in state.withLock({ state in defer { state.waiting.removeAll() }; return state.waiting }) {
                item.deferral.complete(item.empty())
            }
        })
    }

    public func stop() {
        closed.store(true, ordering: .relaxed)
        loop.stop(timeout: 10)
    }

    private func pass() -> BackgroundLoop.Next {
        let listening = self.listening.load(ordering: .relaxed)
        let (items, due, all) = state.withLock { state in
            defer { state.waiting.removeAll(); state.due.removeAll(); state.allDue = false }
            return (state.waiting, state.due, state.allDue || !listening)
        }
        var still: [Waiting] = []
        let now = monotonicNanoseconds()
        for item in items {
            if all || due.contains(item.key) {
                do {
                    if let response = try database.withConnection({ try item.attempt($0) }) {
                        item.deferral.complete(response)
                        continue
                    }
                } catch let error as PostgresError where error.isUnavailable || error.code == .poolTimeout {
                    item.deferral.complete(HTTPError.unavailable().response)
                    continue
                } catch let error as HTTPError {
                    item.deferral.complete(error.response)
                    continue
                } catch {
                    item.deferral.complete(HTTPError.internalError.response)
                    continue
                }
            }
            if now >= item.deadline { item.deferral.complete(item.empty()) } else { still.append(item) }
        }
        let nearest = still.map(\.deadline).min()
        if !still.isEmpty { state.withLock { $0.waiting.append(contentsOf: still) } }
        guard let nearest else { return .idle(seconds: 30) }
        let seconds = Double(nearest > now ? nearest - now : 0) / 1_000_000_000
        return .idle(seconds: listening ? min(seconds + 0.001, 30) : min(seconds + 0.001, 1))
    }
}
