import HeraldDomain
import Dispatch
import Synchronization

/// One background loop on a Dispatch queue of its own (a blocking database call there never
/// starves Swift's cooperative pool): `start(pass:drain:)` runs `pass` until stopped, and after
/// each pass waits as the pass says. The closures live only while the loop runs. Used by every background worker (`FanoutWorker`, `JobWaiter`, `InboxRefresher`,
/// `Maintenance`), so start, wake, stop and drain behave alike.
package final class BackgroundLoop: Sendable {
    /// What the loop does after a pass.
    package enum Next: Sendable {
        /// Run again at once (there was work).
        case again
        /// Wait until woken, or at most this many seconds (other instances' work, expired leases).
        case idle(seconds: Double)
        /// Wait this many seconds whatever wakes it (a wake meanwhile is kept for after); only a
        /// stop ends the wait early.
        case rest(seconds: Double)
    }

    package let label: String
    package let qos: DispatchQoS
    package let firstWait: Next
    private let signal = DispatchSemaphore(value: 0)
    private let woken = Atomic<Bool>(false)
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    /// `firstWait`: before the first pass (`.again`: none).
    package init(label: String, qos: DispatchQoS = .userInitiated, firstWait: Next = .again) {
        self.label = label
        self.qos = qos
        self.firstWait = firstWait
    }

    /// Whether `stop()` has been asked and the loop has not finished yet.
    package var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Starts the loop; a second call while it runs does nothing. `drain` runs after the last
    /// pass, on the loop's queue, before `stop()` returns.
    package func start(pass: @escaping @Sendable () -> Next, drain: @escaping @Sendable () -> Void = {}) {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        DispatchQueue(label: label, qos: qos).async { [self] in
            wait(firstWait)
            while !stopping.load(ordering: .relaxed) {
                wait(pass())
            }
            drain()
            finished.signal()
        }
    }

    /// Ends an `.idle` wait now, or the next one; wakes that come together count once.
    package func wake() {
        if !woken.exchange(true, ordering: .relaxed) { signal.signal() }
    }

    /// Stops after the pass in progress and the drain, waiting at most `timeout` seconds; the
    /// loop may be started again once it has stopped. Returns whether it stopped in time.
    @discardableResult
    package func stop(timeout: Double = 30) -> Bool {
        guard running.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) else { return true }
        signal.signal()
        guard finished.wait(timeout: .now() + timeout) == .success else { return false }
        stopping.store(false, ordering: .relaxed)
        woken.store(false, ordering: .relaxed)
        running.store(false, ordering: .relaxed)
        return true
    }

    private func wait(_ next: Next) {
        switch next {
        case .again:
            return
        case .idle(let seconds):
            if woken.exchange(false, ordering: .relaxed) {
                _ = signal.wait(timeout: .now())  // the wake's own signal, so it counts once
                return
            }
            _ = signal.wait(timeout: .now() + seconds)
            woken.store(false, ordering: .relaxed)
        case .rest(let seconds):
            let deadline = DispatchTime.now() + seconds
            while !stopping.load(ordering: .relaxed), signal.wait(timeout: deadline) == .success {
                // a wake: kept in `woken` for the next idle wait; only a stop ends the rest
            }
        }
    }
}
