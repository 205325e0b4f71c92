import Glibc

/// A mutual-exclusion lock on glibc's default `pthread_mutex_t`, which spins briefly before it
/// sleeps. `Synchronization.Mutex` on Linux uses priority-inheritance futexes that always enter
/// the kernel when contended; under 16 server threads taking a lock per request that made the
/// lock itself the largest cost of a small request (measured with perf for `make bench`, L1).
public final class Lock<State>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var state: State

    /// A lock guarding `state`.
    public init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the state, holding the lock.
    public func withLock<T>(_ body: (inout State) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
