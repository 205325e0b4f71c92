import Dispatch
import Locking
import Synchronization

/// A fixed-size pool of connections, handed out exclusively to blocking callers.
///
/// Connections are opened lazily and replaced when the server drops them (restart, failover):
/// while the database is down, `withConnection` throws an error whose `isUnavailable` is true,
/// and it recovers by itself when the database returns.
public final class PostgresPool: Sendable {
    /// How to reach the database and how many connections to keep.
    public struct Configuration: Sendable {
        /// libpq URL or conninfo string.
        public var connectionString: String
        /// The most connections open at once.
        public var size: Int
        /// How long a caller waits for a free connection before `poolTimeout`.
        public var acquireTimeoutSeconds: Double
        /// `application_name` unless the connection string sets it.
        public var applicationName: String
        /// False behind a pooler in transaction mode: statements are then sent unnamed.
        public var prepareStatements: Bool
        /// Made for each connection's session when it connects (see `PostgresConnection`).
        public var settings: [(name: String, value: String)]

        /// The pool's settings; the connection string is libpq's (URL or conninfo).
        public init(connectionString: String, size: Int = 16, acquireTimeoutSeconds: Double = 5,
                    applicationName: String = "herald", prepareStatements: Bool = true, settings: [(name: String, value: String)] = []) {
            self.connectionString = connectionString
            self.size = max(1, size)
            self.acquireTimeoutSeconds = acquireTimeoutSeconds
            self.applicationName = applicationName
            self.prepareStatements = prepareStatements
            self.settings = settings
        }
    }

    private struct State {
        var idle: [PostgresConnection] = []
        var closed = false
        /// The connection each affinity key last used (`withConnection(affinity:)`).
        var lastUsed: [Int: ObjectIdentifier] = [:]
        /// Connections opened (idle or in use), at most the pool's size.
        var opened = 0
        /// Bumped by `replan()`; each connection's plans are of the generation it last had.
        var generation = 0
        var planned: [ObjectIdentifier: Int] = [:]
    }

    /// What the pool was made with.
    public let configuration: Configuration
    private let slots: DispatchSemaphore
    private let state = Lock(State())
    private let inUseCount = Atomic<Int>(0)
    private let waitingCount = Atomic<Int>(0)

    /// A pool that opens connections as they are first needed.
    public init(configuration: Configuration) {
        self.configuration = configuration
        self.slots = DispatchSemaphore(value: configuration.size)
    }

    /// Connections handed out right now.
    public var inUse: Int { inUseCount.load(ordering: .relaxed) }
    /// Callers waiting for a connection right now.
    public var waiting: Int { waitingCount.load(ordering: .relaxed) }

    /// Runs `body` with a connection of its own, then returns the connection to the pool.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        defer { release(connection) }
        return try body(connection)
    }

    /// Runs `body` with the connection the same `affinity` key used last, when it is idle (else as
    /// `withConnection`). A caller that runs the same statements again and again (an ingest lane)
    /// keeps them prepared and planned on one connection, instead of preparing and planning them
    /// on every connection of the pool in turn (tens of milliseconds each, the first time).
    public func withConnection<T>(affinity: Int, _ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire(affinity: affinity)
        defer {
            state.withLock { $0.lastUsed[affinity] = ObjectIdentifier(connection) }
            release(connection)
        }
        return try body(connection)
    }

    /// Makes every connection open now discard its cached plans (`DISCARD PLANS`) before its
    /// next use, so that each statement is planned again from what the tables are then.
    ///
    /// PostgreSQL keeps a generic plan (a prepared statement's, or a PL/pgSQL function's) for the
    /// connection's life, until an `ANALYZE` of a table it reads. A plan made while the tables
    /// were small reads them whole — a scan is the cheapest way through a table of a few pages,
    /// even where a key is given — and goes on reading them whole as they grow, until the
    /// autovacuum's next analyze (a minute and more: W1 of `make bench`, a new app's first 60,000
    /// replies, ran on the plans of its empty tables). A plan made again sees the tables' sizes.
    public func replan() {
        state.withLock { $0.generation += 1 }
    }

    /// Runs `body` in a transaction on a connection of its own.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try withConnection { connection in try connection.withTransaction(body) }
    }

    /// Closes every idle connection and refuses new callers. Call after requests have drained.
    public func close() {
        let idle = state.withLock { state -> [PostgresConnection] in
            state.closed = true
            defer { state.idle.removeAll() }
            return state.idle
        }
        for connection in idle { connection.close() }
    }

    private func acquire(affinity: Int? = nil) throws -> PostgresConnection {
        waitingCount.add(1, ordering: .relaxed)
        let result = slots.wait(timeout: .now() + configuration.acquireTimeoutSeconds)
        waitingCount.subtract(1, ordering: .relaxed)
        guard result == .success else {
            throw PostgresError(code: .poolTimeout,
                                message: "no database connection free within \(configuration.acquireTimeoutSeconds)s")
        }
        var stalePlans = false
        let taken = state.withLock { state -> (PostgresConnection?, Bool) in
            if state.closed { return (nil, true) }
            /// Whether `connection`'s plans are older than the last `replan()`; notes them as current.
            func take(_ connection: PostgresConnection?) -> (PostgresConnection?, Bool) {
                if let connection {
                    let id = ObjectIdentifier(connection)
                    stalePlans = state.planned[id, default: state.generation] != state.generation
                    state.planned[id] = state.generation
                }
                return (connection, false)
            }
            if let affinity, let last = state.lastUsed[affinity],
               let index = state.idle.lastIndex(where: { ObjectIdentifier($0) == last }) {
                return take(state.idle.remove(at: index))
            }
            // Any other caller takes, while there is one, an idle connection that no affinity key
            // used last: the most recently released is usually a lane's, between its rounds, and
            // taking it sent the lane to another connection to prepare and plan everything again
            // (S1: five connections planned in the first 17 rounds, ~25 ms each).
            let owned = Set(state.lastUsed.values)
            if let index = state.idle.lastIndex(where: { !owned.contains(ObjectIdentifier($0)) }) {
                return take(state.idle.remove(at: index))
            }
            // only keys' connections are idle, or none: below the pool's size another is opened
            if state.idle.isEmpty || state.opened < configuration.size {
                state.opened += 1
                return (nil, false)
            }
            return take(state.idle.popLast())
        }
        if taken.1 {
            slots.signal()
            throw PostgresError(code: .poolClosed, message: "the connection pool is closed")
        }
        inUseCount.add(1, ordering: .relaxed)
        do {
            if let connection = taken.0 {
                try connection.ensureAlive()
                if stalePlans { try connection.execute(unsafeSQL: "DISCARD PLANS") }
                return connection
            }
            let connection = try PostgresConnection(connectionString: configuration.connectionString,
                                                    applicationName: configuration.applicationName,
                                                    prepareStatements: configuration.prepareStatements,
                                                    settings: configuration.settings)
            state.withLock { $0.planned[ObjectIdentifier(connection)] = $0.generation }
            return connection
        } catch {
            // The slot is free again; a broken connection object is kept so that it reconnects next
            // time (its plans still to be discarded, when that was what failed).
            if let connection = taken.0 {
                state.withLock {
                    $0.idle.append(connection)
                    if stalePlans { $0.planned[ObjectIdentifier(connection)] = -1 }
                }
            } else {
                state.withLock { $0.opened -= 1 }
            }
            inUseCount.subtract(1, ordering: .relaxed)
            slots.signal()
            throw error
        }
    }

    private func release(_ connection: PostgresConnection) {
        let keep = state.withLock { state -> Bool in
            if state.closed { return false }
            state.idle.append(connection)
            return true
        }
        if !keep { connection.close() }
        inUseCount.subtract(1, ordering: .relaxed)
        slots.signal()
    }
}
