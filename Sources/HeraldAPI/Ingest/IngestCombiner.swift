import HeraldDomain
import HeraldStore
import Dispatch
import Foundation
import Locking
import Postgres

/// Group commit across concurrent ingest requests (docs/subscriptions.md, "Group commit").
///
/// Requests that touch the same threads serialise on the threads' locks; each then pays a whole
/// transaction — locks, a dozen statements, a commit — for one event. Instead, a request joins
/// the lane of its first event's thread (or group). Each lane applies its queue in rounds on a
/// thread of its own while it has work: a round takes every request queued in the lane (up to `maxEvents` events
/// of one app), applies them together in one transaction with `IngestStore`, and hands each
/// request its own outcomes; requests that arrive meanwhile queue for the next round. Lanes run
/// side by side, so requests on different threads still use every connection.
///
/// The rounds run on the lanes' threads, not on the requests' server threads: a request is
/// parsed, handed over (`submit`) and its connection suspended until its round is done, so a
/// server thread is never held for a round (why: docs/subscriptions.md, "Group commit").
///
/// Every outcome is committed before its request is answered, as before; the batch is what a bus
/// could have sent as one request, and routing does not depend on batching (SPEC §4). If the
/// transaction fails, every request of the round gets the error.
package final class IngestCombiner: Sendable {
    package struct Result: Sendable {
        package let outcomes: [IngestStore.Outcome]
        package let jobsProduced: Int
        /// Requests applied in the same transaction, this one included.
        package let combined: Int
        /// The round trips to PostgreSQL the round made (the first request of a round only, as
        /// `jobsProduced`; 0 for the others).
        package let roundTrips: Int
    }

    package typealias Completion = @Sendable (Swift.Result<Result, any Error>) -> Void

    package final class Pending: Sendable {
        package let app: String
        package let items: [EventParser.Item]
        package let completion: Completion

        package init(app: String, items: [EventParser.Item], completion: @escaping Completion) {
            self.app = app
            self.items = items
            self.completion = completion
        }
    }

    package struct Lane {
        package var queue: [Pending] = []
        package var busy = false
    }

    package let database: PostgresPool
    package let maxEvents: Int
    private let lanes: [Lock<Lane>]

    package init(database: PostgresPool, lanes: Int, maxEvents: Int = 1000) {
        self.database = database
        self.maxEvents = maxEvents
        self.lanes = (0..<max(1, lanes)).map { _ in Lock(Lane()) }
    }

    /// Applies `items` for `app`, possibly together with other requests; `completion` gets this
    /// request's outcomes (or the round's error) on the lane's thread, once they are committed.
    package func submit(_ items: [EventParser.Item], app: String, completion: @escaping Completion) {
        let laneIndex = Self.lane(of: items, app: app, count: lanes.count)
        let starts = lanes[laneIndex].withLock { lane -> Bool in
            lane.queue.append(Pending(app: app, items: items, completion: completion))
            if lane.busy { return false }
            lane.busy = true
            return true
        }
        // A thread of its own (not Dispatch's pool, whose threads a round blocking on a lock
        // could all hold) for as long as the lane has work.
        if starts {
            let thread = Thread { [self] in drain(lane: laneIndex) }
            thread.name = "herald-ingest-lane-\(laneIndex)"
            thread.start()
        }
    }

    /// Applies `items` for `app` as `submit` does, waiting for the outcomes on this thread.
    package func apply(_ items: [EventParser.Item], app: String) throws -> Result {
        let done = DispatchSemaphore(value: 0)
        let answer = Lock<Swift.Result<Result, any Error>?>(nil)
        submit(items, app: app) { result in
            answer.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try answer.withLock { $0! }.get()
    }

    /// Rounds until the lane's queue is empty; then the lane is free, and the next request starts it again.
    private func drain(lane laneIndex: Int) {
        let lane = lanes[laneIndex]
        while true {
            let round = lane.withLock { lane -> [Pending] in
                guard let first = lane.queue.first else {
                    lane.busy = false
                    return []
                }
                var taken: [Pending] = []
                var events = 0
                var rest: [Pending] = []
                for pending in lane.queue {
                    if pending.app == first.app && (taken.isEmpty || events + pending.items.count <= maxEvents) {
                        taken.append(pending)
                        events += pending.items.count
                    } else {
                        rest.append(pending)
                    }
                }
                lane.queue = rest
                return taken
            }
            guard !round.isEmpty else { return }
            for (pending, result) in zip(round, run(round, lane: laneIndex)) { pending.completion(result) }
        }
    }

    /// One round in one transaction: each request's result, in order.
    private func run(_ round: [Pending], lane: Int) -> [Swift.Result<Result, any Error>] {
        guard let app = round.first?.app else { return [] }
        do {
            let all = round.flatMap(\.items)
            // the lane's last connection: its statements are prepared and planned there already
            let (outcomes, jobs, trips) = try database.withConnection(affinity: lane) { connection in
                let before = connection.roundTrips
                let (outcomes, jobs) = try IngestStore().apply(all, app: app, on: connection)
                return (outcomes, jobs, connection.roundTrips - before)
            }
            var offset = 0
            return round.enumerated().map { index, pending in
                let mine = Array(outcomes[offset..<offset + pending.items.count])
                offset += pending.items.count
                return .success(Result(outcomes: mine, jobsProduced: index == 0 ? jobs : 0, combined: round.count,
                                       roundTrips: index == 0 ? trips : 0))
            }
        } catch {
            return round.map { _ in .failure(error) }
        }
    }

    /// The lane of a request: its first event's thread, or group for membership events, so that
    /// requests that would wait for each other's locks are applied together.
    package static func lane(of items: [EventParser.Item], app: String, count: Int) -> Int {
        var key = app
        for item in items {
            guard case .valid(let event, _) = item else { continue }
            switch event.event {
            case .messageCreated(let m): key += "t" + m.threadID
            case .messageEdited(let m): key += "t" + m.threadID
            case .messageDeleted(let m): key += "t" + m.threadID
            case .membership(let change), .memberNotice(let change): key += "g" + change.guid
            case .groupDeleted(let guid, _): key += "g" + guid
            case .reaction(let r): key += "t" + r.threadID
            case .messagePin(let pin): key += "p" + pin.messageID
            case .messageSave(let save): key += "u" + save.uid
            case .conversationPin(let pin): key += "u" + pin.owner
            case .noEffect: continue
            }
            break
        }
        // FNV-1a: stable and cheap (Swift's Hasher is seeded per process, which would do too).
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(hash % UInt64(count))
    }
}
