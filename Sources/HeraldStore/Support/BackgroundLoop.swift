import HeraldDomain
import Dispatch
import Locking
import Synchronization

/// One background loop: `run(pass:drain:)` runs `pass` until `shutdown()`, and after each pass
/// waits as the pass says, on the calling thread — a service's own (`ServiceGroup`), so a
/// blocking database call there never starves Swift's cooperative pool. Used by every background
/// worker (`FanoutWorker`, `JobWaiter`, `ChangeWaiter`, `InboxRefresher`, `Maintenance`,
/// `DigestCloser`, `DeliveryLoop` and its `AppDeliverer`s), so run, wake, stop and drain behave alike.
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

    /// Whether a stop has been asked and the loop has not finished yet.
    package var isStopping: Bool { stopping.load(ordering: .relaxed) }

    /// Runs the loop on this thread until `shutdown()`, then `drain`; returns once drained. A
    /// pass that throws ends the loop as a shutdown would (the drain runs) and the error is
    /// thrown, so that the service's end is noticed; a pass that can meet a passing error (the
    /// database away) catches it and says when to look again. A second call while it runs
    /// returns at once.
    package func run(pass: () throws -> Next, drain: () -> Void = {}) rethrows {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        defer {
            stopping.store(false, ordering: .relaxed)
            woken.store(false, ordering: .relaxed)
            running.store(false, ordering: .relaxed)
        }
        try loop(pass: pass, drain: drain)
    }

    /// Asks `run` to return after the pass in progress and the drain; does not wait. Asked before
    /// `run` starts, `run` returns at once (after the drain).
    package func shutdown() {
        if !stopping.exchange(true, ordering: .relaxed) { signal.signal() }
    }

    /// Starts the loop on a thread of its own, for a loop that another one owns and stops
    /// (`AppDeliverer`, one per delivering app); a second call while it runs does nothing.
    /// `drain` runs after the last pass, on the loop's thread, before `stop()` returns. A thread
    /// (`DetachedThread`), not a Dispatch queue: the loop waits between passes, and each waiting
    /// queue held one of Dispatch's few workers (above ~250 delivering apps none was left).
    /// Returns false when no thread could be made (the process's limit) and the loop runs on
    /// Dispatch's pool instead, where enough waiting loops starve each other (the caller logs it).
    @discardableResult
    package func start(pass: @escaping @Sendable () -> Next, drain: @escaping @Sendable () -> Void = {}) -> Bool {
        guard !running.exchange(true, ordering: .relaxed) else { return true }
        let started = DetachedThread.start { [self] in
            loop(pass: pass, drain: drain)
            finished.signal()
        }
        if !started {
            // no thread to be had: run on Dispatch's pool rather than not at all
            DispatchQueue(label: label, qos: qos).async { [self] in
                loop(pass: pass, drain: drain)
                finished.signal()
            }
        }
        return started
    }

    /// The loop itself: the first wait, passes until a stop is asked (or one throws), the drain.
    private func loop(pass: () throws -> Next, drain: () -> Void) rethrows {
        defer { drain() }
        wait(firstWait)
        while !stopping.load(ordering: .relaxed) {
            wait(try pass())
        }
    }

    /// Ends an `.idle` wait now, or the next one; wakes that come together count once.
    package func wake() {
        if !woken.exchange(true, ordering: .relaxed) { signal.signal() }
    }

    /// Asks a loop that `start` started to stop after the pass in progress, without waiting for
    /// it (`stop` waits). For stopping many together: each is asked first, then each is waited
    /// for, so that they finish their passes at the same time, not one after another.
    package func requestStop() {
        guard running.load(ordering: .relaxed), !stopping.exchange(true, ordering: .relaxed) else { return }
        signal.signal()
    }

    /// Stops a loop that `start` started (asking it, unless `requestStop` did), after the pass in
    /// progress and the drain, waiting at most `timeout` seconds; it may be started again once it
    /// has stopped. Returns whether it stopped in time. One caller waits for a loop at a time.
    @discardableResult
    package func stop(timeout: Double = 30) -> Bool {
        guard running.load(ordering: .relaxed) else { return true }
        if !stopping.exchange(true, ordering: .relaxed) { signal.signal() }
        guard finished.wait(timeout: .now() + timeout) == .success else { return false }
        stopping.store(false, ordering: .relaxed)
        woken.store(false, ordering: .relaxed)
        running.store(false, ordering: .relaxed)
        return true
    }

    /// Stops loops that `start` started together: every one is asked, then each is waited for
    /// (at most `timeout` seconds in all). Returns whether all stopped in time.
    @discardableResult
    package static func stopTogether(_ loops: [BackgroundLoop], timeout: Double = 30) -> Bool {
        for loop in loops { loop.requestStop() }
        let deadline = DispatchTime.now() + timeout
        var all = true
        for loop in loops {
            let left = Double(Int64(deadline.uptimeNanoseconds) - Int64(DispatchTime.now().uptimeNanoseconds)) / 1e9
            all = loop.stop(timeout: max(left, 0)) && all
        }
        return all
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
