import Dispatch
import Glibc
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import Synchronization
import Testing

/// `ServiceGroup` with tiny fake services: start order, reverse stop (a stage together), an
/// unexpected end noticed once, a prepare that fails, a service that does not stop in time.
@Suite("Service group")
struct ServiceGroupTests {
    /// What the fake services did, in order.
    final class Journal: Sendable {
        private let entries = Mutex<[String]>([])
        func note(_ entry: String) { entries.withLock { $0.append(entry) } }
        var all: [String] { entries.withLock { $0 } }
        /// The entries that start with one of `prefixes`.
        func only(_ prefixes: String...) -> [String] { all.filter { entry in prefixes.contains { entry.hasPrefix($0 + " ") } } }
    }

    struct FakeError: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs until shut down (then takes `stopSeconds` to drain), or until `end` makes it return
    /// or throw by itself.
    final class FakeService: Service {
        enum Ending { case shutdown, returns, throwsError }

        let name: String
        let journal: Journal
        let failPrepare: Bool
        let prepareSeconds: Double
        let stopSeconds: Double
        /// Ignores `shutdown()` until `release()` (a service that hangs).
        let hangs: Bool
        let shutdownTimeoutSeconds: Double?
        private let wakeUp = DispatchSemaphore(value: 0)
        private let released = DispatchSemaphore(value: 0)
        private let ending = Mutex(Ending.shutdown)

        init(_ name: String, journal: Journal, failPrepare: Bool = false, prepareSeconds: Double = 0, stopSeconds: Double = 0,
             hangs: Bool = false, timeout: Double? = 5) {
            self.name = name
            self.journal = journal
            self.failPrepare = failPrepare
            self.prepareSeconds = prepareSeconds
            self.stopSeconds = stopSeconds
            self.hangs = hangs
            self.shutdownTimeoutSeconds = timeout
        }

        func prepare() throws {
            journal.note("prepare \(name)")
            if prepareSeconds > 0 { usleep(UInt32(prepareSeconds * 1_000_000)) }
            if failPrepare { throw FakeError(description: "\(name) cannot prepare") }
        }

        func run() throws {
            journal.note("run \(name)")
            wakeUp.wait()
            switch ending.withLock({ $0 }) {
            case .shutdown:
                if hangs { released.wait() }
                if stopSeconds > 0 { usleep(UInt32(stopSeconds * 1_000_000)) }
                journal.note("stopped \(name)")
            case .returns:
                journal.note("returned \(name)")
            case .throwsError:
                journal.note("failed \(name)")
                throw FakeError(description: "\(name) broke")
            }
        }

        func shutdown() {
            journal.note("shutdown \(name)")
            wakeUp.signal()
        }

        /// Makes `run()` end by itself.
        func end(_ how: Ending) {
            ending.withLock { $0 = how }
            wakeUp.signal()
        }

        func release() { released.signal() }
    }

    /// The lines a group logs, and its unexpected ends.
    final class Observer: Sendable {
        private let lines = Mutex<[String]>([])
        private let ends = Mutex<[ServiceGroup.End]>([])
        private let ended = DispatchSemaphore(value: 0)

        var logger: Logger { Logger(level: .debug) { [self] line in lines.withLock { $0.append(line) } } }
        var handler: @Sendable (ServiceGroup.End) -> Void {
            { [self] end in
                ends.withLock { $0.append(end) }
                ended.signal()
            }
        }
        var allLines: [String] { lines.withLock { $0 } }
        var allEnds: [ServiceGroup.End] { ends.withLock { $0 } }
        /// Waits for the handler's first call.
        func waitForEnd(seconds: Double = 5) -> Bool { ended.wait(timeout: .now() + seconds) == .success }
    }

    /// Polls `condition` until it holds or `seconds` pass.
    static func eventually(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
        let deadline = DispatchTime.now() + seconds
        while DispatchTime.now() < deadline {
            if condition() { return true }
            usleep(10_000)
        }
        return condition()
    }

    @Test("services are prepared and run in order, and stopped one by one in reverse")
    func startInOrderStopInReverse() throws {
        let journal = Journal()
        let observer = Observer()
        let services = ["a", "b", "c"].map { FakeService($0, journal: journal) }
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 3 })
        #expect(journal.only("prepare") == ["prepare a", "prepare b", "prepare c"])
        for name in ["a", "b", "c"] {
            let entries = journal.all
            #expect(entries.firstIndex(of: "prepare \(name)")! < entries.firstIndex(of: "run \(name)")!, "\(name) runs once prepared")
        }
        #expect(group.shutdown())
        #expect(journal.only("shutdown", "stopped") == ["shutdown c", "stopped c", "shutdown b", "stopped b", "shutdown a", "stopped a"])
        #expect(group.unexpectedEnd == nil)
        #expect(observer.allEnds.isEmpty)
        #expect(!observer.allLines.contains { $0.contains("ended unexpectedly") })
        #expect(!group.shutdown(), "a second shutdown has nothing to stop")
        #expect(journal.only("shutdown").count == 3)
    }

    @Test("a stage's services are stopped together, after the stages started after them and before those started before")
    func stageStopsTogether() throws {
        let journal = Journal()
        let observer = Observer()
        let first = FakeService("first", journal: journal)
        let x = FakeService("x", journal: journal, stopSeconds: 0.5)
        let y = FakeService("y", journal: journal, stopSeconds: 0.5)
        let last = FakeService("last", journal: journal)
        let group = ServiceGroup(stages: [[first], [x, y], [last]], logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 4 })
        group.shutdown()
        let stops = journal.only("shutdown", "stopped")
        #expect(stops.prefix(2) == ["shutdown last", "stopped last"])
        #expect(stops.suffix(2) == ["shutdown first", "stopped first"])
        #expect(Set(stops[2..<4]) == ["shutdown x", "shutdown y"], "both asked before either finished: \(stops)")
        #expect(Set(stops[4..<6]) == ["stopped x", "stopped y"])
    }

    @Test("a service that throws when no shutdown was asked: an error line, the others stopped in reverse, the handler once")
    func unexpectedEnd() throws {
        let journal = Journal()
        let observer = Observer()
        let services = ["a", "b", "c"].map { FakeService($0, journal: journal) }
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 3 })
        services[1].end(.throwsError)
        #expect(observer.waitForEnd())
        #expect(journal.only("shutdown", "stopped", "failed") == ["failed b", "shutdown c", "stopped c", "shutdown a", "stopped a"],
                "the others stopped in reverse before the handler; the one that ended is left alone")
        let expected = ServiceGroup.End(service: "b", reason: "b broke")
        #expect(observer.allEnds == [expected])
        #expect(group.unexpectedEnd == expected)
        let line = try #require(observer.allLines.first { $0.contains("service ended unexpectedly") })
        #expect(line.contains(#""level":"error""#) && line.contains(#""service":"b""#) && line.contains(#""error":"b broke""#), "\(line)")
        #expect(!group.shutdown(), "stopped already")
        usleep(100_000)
        #expect(observer.allEnds.count == 1, "the handler is called once")
        #expect(journal.only("shutdown").count == 2)
    }

    @Test("a run() that returns when no shutdown was asked is an unexpected end too")
    func returningIsAnEnd() throws {
        let journal = Journal()
        let observer = Observer()
        let services = ["a", "b"].map { FakeService($0, journal: journal) }
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 2 })
        services[0].end(.returns)
        #expect(observer.waitForEnd())
        #expect(observer.allEnds == [ServiceGroup.End(service: "a", reason: "run() returned")])
        #expect(journal.only("shutdown", "stopped") == ["shutdown b", "stopped b"])
    }

    @Test("two services that end at once: the group stops once and calls the handler once")
    func twoEndsAtOnce() throws {
        let journal = Journal()
        let observer = Observer()
        let services = ["a", "b", "c"].map { FakeService($0, journal: journal) }
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 3 })
        DispatchQueue.concurrentPerform(iterations: 2) { index in services[index * 2].end(.throwsError) }
        #expect(observer.waitForEnd())
        usleep(200_000)
        #expect(observer.allEnds.count == 1)
        let winner = try #require(observer.allEnds.first?.service)
        #expect(["a", "c"].contains(winner))
        #expect(journal.only("shutdown").filter { $0 == "shutdown b" }.count == 1, "the one still running is stopped once")
        #expect(!journal.all.contains("shutdown \(winner)"))
    }

    @Test("a prepare that fails stops the services already running, in reverse, and is thrown")
    func prepareFailureRollsBack() throws {
        let journal = Journal()
        let observer = Observer()
        let services = [FakeService("a", journal: journal), FakeService("b", journal: journal),
                        FakeService("c", journal: journal, failPrepare: true), FakeService("d", journal: journal)]
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        #expect(throws: FakeError.self) { try group.start() }
        #expect(journal.only("prepare") == ["prepare a", "prepare b", "prepare c"])
        #expect(!journal.all.contains("run c") && !journal.all.contains("run d"))
        #expect(journal.only("shutdown", "stopped") == ["shutdown b", "stopped b", "shutdown a", "stopped a"])
        #expect(observer.allEnds.isEmpty, "a failed start is thrown, not handed to the handler")
        #expect(!group.shutdown())
    }

    @Test("a service that ends while the group starts: start stops what runs and throws the end")
    func endDuringStart() throws {
        let journal = Journal()
        let observer = Observer()
        let services = [FakeService("a", journal: journal), FakeService("b", journal: journal, prepareSeconds: 0.5),
                        FakeService("c", journal: journal)]
        let group = ServiceGroup(services: services, logger: observer.logger, onUnexpectedEnd: observer.handler)
        let thrown = Mutex<(any Error)?>(nil)
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            do { try group.start() } catch { thrown.withLock { $0 = error } }
            started.signal()
        }
        // a ends while b prepares
        #expect(Self.eventually { journal.all.contains("prepare b") })
        services[0].end(.throwsError)
        #expect(started.wait(timeout: .now() + 5) == .success)
        let end = (thrown.withLock { $0 } as? ServiceGroup.EndedDuringStart)?.end
        #expect(end == ServiceGroup.End(service: "a", reason: "a broke"))
        #expect(!journal.all.contains("prepare c"), "nothing more starts")
        #expect(journal.only("shutdown", "stopped") == ["shutdown b", "stopped b"])
        #expect(observer.allEnds.isEmpty)
        #expect(observer.allLines.contains { $0.contains("service ended unexpectedly") && $0.contains(#""service":"a""#) })
    }

    @Test("a service that does not stop within its timeout is left behind, with a warning")
    func timeout() throws {
        let journal = Journal()
        let observer = Observer()
        let stuck = FakeService("stuck", journal: journal, hangs: true, timeout: 0.2)
        let group = ServiceGroup(services: [stuck], logger: observer.logger, onUnexpectedEnd: observer.handler)
        try group.start()
        #expect(Self.eventually { journal.only("run").count == 1 })
        let started = DispatchTime.now()
        group.shutdown()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9
        #expect(seconds < 3, "waited \(seconds) s")
        #expect(observer.allLines.contains { $0.contains("service did not stop in time") && $0.contains(#""service":"stuck""#) })
        stuck.release()
        #expect(Self.eventually { journal.all.contains("stopped stuck") })
        usleep(50_000)
        #expect(observer.allEnds.isEmpty, "its late end is no unexpected one")
    }

    @Test("a loop pass that throws ends run(): the drain runs and the error is thrown")
    func loopPassThrows() {
        let loop = BackgroundLoop(label: "test.loop")
        var passes = 0
        var drained = false
        var thrown: (any Error)?
        do {
            try loop.run(pass: {
                passes += 1
                if passes == 3 { throw FakeError(description: "pass broke") }
                return .again
            }, drain: { drained = true })
        } catch {
            thrown = error
        }
        #expect((thrown as? FakeError)?.description == "pass broke")
        #expect(passes == 3)
        #expect(drained)
    }

    @Test("a loop shut down before run() starts runs no pass and returns at once, drained")
    func loopShutdownFirst() {
        let loop = BackgroundLoop(label: "test.loop", firstWait: .rest(seconds: 60))
        loop.shutdown()
        var passes = 0
        var drained = false
        let started = DispatchTime.now()
        loop.run(pass: {
            passes += 1
            return .idle(seconds: 60)
        }, drain: { drained = true })
        #expect(passes == 0)
        #expect(drained)
        #expect(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds < 1_000_000_000)
    }

    @Test("started loops each run on a thread of their own: 400 waiting loops do not keep a new one from its first pass")
    func manyStartedLoops() {
        let waiting = (0..<400).map { BackgroundLoop(label: "test.waiting.\($0)") }
        let passed = DispatchSemaphore(value: 0)
        for loop in waiting { loop.start(pass: { passed.signal(); return .idle(seconds: 60) }) }
        // every waiting loop ran its first pass (so each holds its thread in the wait)
        var first = 0
        while first < waiting.count, passed.wait(timeout: .now() + 10) == .success { first += 1 }
        #expect(first == waiting.count)
        let late = BackgroundLoop(label: "test.late")
        let ran = DispatchSemaphore(value: 0)
        let drained = Atomic<Int>(0)
        late.start(pass: { ran.signal(); return .idle(seconds: 60) }, drain: { drained.add(1, ordering: .relaxed) })
        #expect(ran.wait(timeout: .now() + 10) == .success, "the 401st loop ran its first pass")
        // stop ends the wait at once and returns after the drain; the loop can be started again
        #expect(late.stop(timeout: 5))
        #expect(drained.load(ordering: .relaxed) == 1)
        late.start(pass: { ran.signal(); return .idle(seconds: 60) }, drain: { drained.add(1, ordering: .relaxed) })
        #expect(ran.wait(timeout: .now() + 10) == .success, "started again")
        #expect(late.stop(timeout: 5))
        #expect(drained.load(ordering: .relaxed) == 2)
        #expect(waiting.allSatisfy { $0.stop(timeout: 5) })
    }

    @Test("loops stopped together are all asked before any is waited for: every drain runs while all are stopping")
    func stopTogether() {
        let loops = (0..<20).map { BackgroundLoop(label: "test.together.\($0)") }
        let passed = DispatchSemaphore(value: 0)
        let draining = Atomic<Int>(0)
        let together = Atomic<Int>(0)
        let allDraining = DispatchSemaphore(value: 0)
        for loop in loops {
            loop.start(pass: { passed.signal(); return .idle(seconds: 60) }, drain: {
                if draining.add(1, ordering: .relaxed).newValue == loops.count {
                    for _ in loops { allDraining.signal() }
                }
                // each drain waits for every other loop to be draining too: one stopped after
                // another, the first would wait alone
                if allDraining.wait(timeout: .now() + 5) == .success { together.add(1, ordering: .relaxed) }
            })
        }
        for _ in loops { _ = passed.wait(timeout: .now() + 10) }
        #expect(BackgroundLoop.stopTogether(loops, timeout: 30))
        #expect(together.load(ordering: .relaxed) == loops.count)
    }
}
