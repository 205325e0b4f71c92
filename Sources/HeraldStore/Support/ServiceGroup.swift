import HeraldDomain
import Dispatch
import Synchronization

/// A long-running part of Herald in swift-service-lifecycle's shape: `run()` blocks for as long
/// as the service works, and returns only once `shutdown()` asked it to and it has drained. A
/// `run()` that returns or throws before that is an unexpected end, and `ServiceGroup` notices it.
package protocol Service: Sendable {
    /// Names the service in logs (`service`) and in `HERALD_TEST_END_SERVICE`.
    var name: String { get }
    /// At most how long the group waits for `run()` to return after `shutdown()`; nil: until it
    /// does (a service that bounds its own drain, as the HTTP listener does).
    var shutdownTimeoutSeconds: Double? { get }
    /// Synchronous set-up before `run()`, whose failure is thrown to whoever starts the group
    /// (the HTTP listener binds its port here: a bind failure fails the start, and the port is
    /// known once the group has started). Default: nothing.
    func prepare() throws
    /// Works until `shutdown()`, then drains and returns. Runs on a thread of its own.
    func run() throws
    /// Asks `run()` to finish and return; does not wait for it. It may come before `run()`
    /// starts (a start that failed further on): `run()` then returns at once.
    func shutdown()
}

extension Service {
    package func prepare() throws {}
    package var shutdownTimeoutSeconds: Double? { 30 }
}

/// Runs services and stops them, in one place: `start()` prepares the stages' services in order,
/// each then running on a thread of its own; `shutdown()` stops the stages in reverse order, one
/// stage after another, the services of a stage together (none needs another), each waited for up
/// to its `shutdownTimeoutSeconds`. A prepare that fails stops what runs already, in the same way,
/// and is thrown.
///
/// A service whose `run()` returns or throws when no shutdown was asked ends the group: an error
/// line (`service ended unexpectedly`, with `service` and `error`), the others stopped as by
/// `shutdown()`, then `onUnexpectedEnd`, once (`herald serve` exits non-zero there). A loop that
/// ends never goes unnoticed, and a half-running Herald does not go on serving.
package final class ServiceGroup: Sendable {
    /// Which service ended when it should not have, and why.
    package struct End: Sendable, Equatable, CustomStringConvertible {
        package let service: String
        /// The error `run()` threw, or that it returned.
        package let reason: String

        package init(service: String, reason: String) {
            self.service = service
            self.reason = reason
        }

        package var description: String { "\(service) ended unexpectedly: \(reason)" }
    }

    /// Thrown by `start()` when a service ended while the group was still starting.
    package struct EndedDuringStart: Error, CustomStringConvertible {
        package let end: End
        package var description: String { end.description }
    }

    package let stages: [[any Service]]
    package let logger: Logger
    package let onUnexpectedEnd: @Sendable (End) -> Void
    private let state = Mutex(State())
    /// Entered by `start()`, left once every service that ran has been stopped.
    private let stopped = DispatchGroup()

    private enum Phase { case idle, starting, running, stopping, stopped }

    private struct State {
        package var phase = Phase.idle
        package var runners: [Runner] = []
        /// The first unexpected end.
        package var end: End?
        /// `shutdown()` came while `start()` was still starting services.
        package var shutdownAsked = false
    }

    /// A service whose `run()` was dispatched; `finished` is left when `run()` returns.
    private struct Runner: Sendable {
        package let service: any Service
        package let stage: Int
        package let finished: DispatchGroup
    }

    /// `stages`: in start order; a stage's services are started in order and stopped together.
    package init(stages: [[any Service]], logger: Logger, onUnexpectedEnd: @escaping @Sendable (End) -> Void = { _ in }) {
        self.stages = stages
        self.logger = logger
        self.onUnexpectedEnd = onUnexpectedEnd
    }

    /// One service per stage: started in order, stopped one by one in reverse.
    package convenience init(services: [any Service], logger: Logger, onUnexpectedEnd: @escaping @Sendable (End) -> Void = { _ in }) {
        self.init(stages: services.map { [$0] }, logger: logger, onUnexpectedEnd: onUnexpectedEnd)
    }

    /// The unexpected end that stopped the group, if one did.
    package var unexpectedEnd: End? { state.withLock { $0.end } }

    /// Prepares each service in order and dispatches its `run()`; returns once all run. Throws
    /// what a `prepare()` threw, or `EndedDuringStart`, after stopping the services that run.
    package func start() throws {
        state.withLock { state in
            precondition(state.phase == .idle, "a service group starts once")
            state.phase = .starting
            stopped.enter()   // before a shutdown() can see the group starting and wait
        }
        starting: for (index, stage) in stages.enumerated() {
            for service in stage {
                // a service ended, or shutdown was asked, meanwhile: start no more
                if state.withLock({ $0.end != nil || $0.shutdownAsked }) { break starting }
                do {
                    try service.prepare()
                } catch {
                    stopAll()
                    throw error
                }
                launch(service, stage: index)
            }
        }
        let (running, end) = state.withLock { state -> (Bool, End?) in
            guard state.end == nil, !state.shutdownAsked else {
                state.phase = .stopping
                return (false, state.end)
            }
            state.phase = .running
            return (true, nil)
        }
        guard !running else { return }
        stopAll()
        if let end { throw EndedDuringStart(end: end) }
    }

    /// Stops the services in reverse stage order and returns once they have stopped (or their
    /// time was up). Returns false when they were stopped, or being stopped, already (after an
    /// unexpected end; then it waits for that); `beginning` runs only when this call stops them.
    @discardableResult
    package func shutdown(beginning: () -> Void = {}) -> Bool {
        let stopsThem = state.withLock { state -> Bool in
            switch state.phase {
            case .idle:
                state.phase = .stopped
                return false
            case .starting:
                state.shutdownAsked = true   // start() stops what it started
                return false
            case .running:
                state.phase = .stopping
                return true
            case .stopping, .stopped:
                return false
            }
        }
        guard stopsThem else {
            stopped.wait()
            return false
        }
        beginning()
        stopAll()
        return true
    }

    private func launch(_ service: any Service, stage: Int) {
        let runner = Runner(service: service, stage: stage, finished: DispatchGroup())
        runner.finished.enter()
        state.withLock { $0.runners.append(runner) }
        // A thread of its own (a blocking run never starves a shared pool).
        DispatchQueue(label: "herald.service.\(service.name)", qos: .userInitiated).async { [self] in
            var failure: (any Error)?
            do { try service.run() } catch { failure = error }
            runner.finished.leave()
            ended(service.name, reason: failure.map { String(describing: $0) } ?? "run() returned", failed: failure != nil)
        }
    }

    /// A service's `run()` returned or threw.
    private func ended(_ name: String, reason: String, failed: Bool) {
        enum Action { case none, record, stop }
        let action = state.withLock { state -> Action in
            switch state.phase {
            case .idle, .stopping, .stopped:
                return .none
            case .starting:
                if state.end == nil { state.end = End(service: name, reason: reason) }
                return .record
            case .running:
                state.end = End(service: name, reason: reason)
                state.phase = .stopping
                return .stop
            }
        }
        switch action {
        case .none:
            if failed { logger.warn("service failed while stopping", ["service": .string(name), "error": .string(reason)]) }
        case .record:
            logger.error("service ended unexpectedly", ["service": .string(name), "error": .string(reason)])
        case .stop:
            logger.error("service ended unexpectedly", ["service": .string(name), "error": .string(reason)])
            stopAll()
            onUnexpectedEnd(End(service: name, reason: reason))
        }
    }

    /// Stops every service that runs, stage by stage in reverse, then marks the group stopped.
    private func stopAll() {
        let runners = state.withLock { $0.runners }
        for stage in Set(runners.map(\.stage)).sorted(by: >) {
            let members = runners.filter { $0.stage == stage }
            if members.count == 1 {
                stop(members[0])
            } else {
                // each on a queue of its own: the global queues are as wide as the cores, and
                // waiting stops there would queue up behind one another
                let together = DispatchGroup()
                for runner in members {
                    DispatchQueue(label: "herald.service.stop.\(runner.service.name)").async(group: together) { [self] in stop(runner) }
                }
                together.wait()
            }
        }
        state.withLock { $0.phase = .stopped }
        stopped.leave()
    }

    /// Asks one service to stop and waits for its `run()` to return, up to its timeout; one that
    /// ended already is left alone.
    private func stop(_ runner: Runner) {
        guard runner.finished.wait(timeout: .now()) == .timedOut else { return }
        runner.service.shutdown()
        guard let seconds = runner.service.shutdownTimeoutSeconds else {
            runner.finished.wait()
            return
        }
        if runner.finished.wait(timeout: .now() + seconds) == .timedOut {
            logger.warn("service did not stop in time", ["service": .string(runner.service.name), "seconds": .double(seconds)])
        }
    }
}
