import Dispatch
import Glibc
import Synchronization

/// Monotonic time in nanoseconds.
func now() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}

/// The wall clock in seconds since the epoch (to compare with times PostgreSQL stored).
func wallSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_REALTIME, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// What a load run measured: operations, wall time, and each operation's latency.
struct LoadResult {
    var operations = 0
    var errors = 0
    var seconds = 0.0
    var latencies: [UInt64] = []

    var perSecond: Double { seconds > 0 ? Double(operations) / seconds : 0 }

    /// The latency at quantile q (0...1), in milliseconds.
    func percentile(_ q: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let sorted = latencies.sorted()
        let index = min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.up)) - 1)
        return Double(sorted[max(0, index)]) / 1_000_000
    }
}

/// Per worker: counts and latencies, merged at the end.
final class WorkerLog: @unchecked Sendable {
    var operations = 0
    var errors = 0
    var latencies: [UInt64] = []
    var firstError: String?

    func record(_ started: UInt64, ok: Bool, count: Int = 1, error: String? = nil) {
        latencies.append(now() - started)
        if ok { operations += count } else {
            errors += 1
            if firstError == nil { firstError = error }
        }
    }
}

/// Runs `workers` threads; each calls `body(worker, log)` until it returns false or `seconds` pass.
/// Every worker has its own log (no sharing on the hot path).
func runLoad(workers: Int, seconds: Double? = nil, _ body: @escaping @Sendable (Int, WorkerLog) throws -> Bool) -> LoadResult {
    let logs = (0..<workers).map { _ in WorkerLog() }
    let deadline: UInt64? = seconds.map { now() + UInt64($0 * 1_000_000_000) }
    let group = DispatchGroup()
    let started = now()
    for worker in 0..<workers {
        let log = logs[worker]
        let thread = Thread {
            defer { group.leave() }
            while deadline.map({ now() < $0 }) ?? true {
                do {
                    if try !body(worker, log) { break }
                } catch {
                    log.errors += 1
                    if log.firstError == nil { log.firstError = "\(error)" }
                    if log.errors > 1000 { break }
                }
            }
        }
        group.enter()
        thread.start()
    }
    group.wait()
    var result = LoadResult()
    result.seconds = Double(now() - started) / 1_000_000_000
    for log in logs {
        result.operations += log.operations
        result.errors += log.errors
        result.latencies += log.latencies
    }
    if let message = logs.compactMap(\.firstError).first { say("    (first error: \(message))") }
    return result
}

/// A plain pthread running a closure (Foundation's Thread is not needed for this).
final class Thread: @unchecked Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }

    func start() {
        let box = Unmanaged.passRetained(self)
        var handle = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setstacksize(&attributes, 4 << 20)
        pthread_create(&handle, &attributes, { pointer in
            let thread = Unmanaged<Thread>.fromOpaque(pointer!).takeRetainedValue()
            thread.body()
            return nil
        }, box.toOpaque())
        pthread_detach(handle)
        pthread_attr_destroy(&attributes)
    }
}

/// A counter shared by workers that hand out work items.
final class Ticket: Sendable {
    private let next = Atomic<Int>(0)
    let limit: Int
    init(limit: Int) { self.limit = limit }
    /// The next item's index, or nil when all are taken.
    func take() -> Int? {
        let value = next.add(1, ordering: .relaxed).oldValue
        return value < limit ? value : nil
    }
}
