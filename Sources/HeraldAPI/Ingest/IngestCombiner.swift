import HeraldDomain
import HeraldStore
import Dispatch
import Locking
import Postgres

/// Group commit across concurrent ingest requests (docs/subscriptions.md, "Group commit").
///
/// Requests that touch the same threads serialise on the threads' locks; each then pays a whole
/// transaction — locks, a dozen statements, a commit — for one event. Instead, a request joins
/// the lane of its first event's thread (or group). One request of a lane at a time leads: it
/// takes every request queued in the lane (up to `maxEvents` events of one app), applies them
/// together in one transaction with `IngestStore`, and hands each request its own outcomes.
/// Requests that arrive meanwhile queue for the next round, led by the first of them. Lanes run
/// side by side, so requests on different threads still use every connection.
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
    }

    package final class Pending: @unchecked Sendable {
        package let app: String
        package let items: [EventParser.Item]
        package let signal = DispatchSemaphore(value: 0)
        // Written by the leader before `signal`, read by the owner after it.
        package var result: Swift.Result<Result, any Error>?

        package init(app: String, items: [EventParser.Item]) {
            self.app = app
            self.items = items
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

    /// Applies `items` for `app`, possibly together with other requests; returns this request's outcomes.
    package func apply(_ items: [EventParser.Item], app: String) throws -> Result {
        let laneIndex = Self.lane(of: items, app: app, count: lanes.count)
        let lane = lanes[laneIndex]
        let me = Pending(app: app, items: items)
        let leads = lane.withLock { lane -> Bool in
            lane.queue.append(me)
            if lane.busy { return false }
            lane.busy = true
            return true
        }
        if !leads {
            me.signal.wait()
            // Either a leader applied this request, or the last leader handed the lane over.
            if let result = me.result { return try result.get() }
        }
        while me.result == nil {
            let round = lane.withLock { lane -> [Pending] in
                guard let first = lane.queue.first else { return [] }
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
            run(round, lane: laneIndex)
            for pending in round where pending !== me { pending.signal.signal() }
        }
        // Hand the lane to the first request still waiting, or free it.
        let next = lane.withLock { lane -> Pending? in
            if let first = lane.queue.first { return first }
            lane.busy = false
            return nil
        }
        next?.signal.signal()
        return try me.result!.get()
    }

    private func run(_ round: [Pending], lane: Int) {
        guard let app = round.first?.app else { return }
        do {
            let all = round.flatMap(\.items)
            // the lane's last connection: its statements are prepared and planned there already
            let (outcomes, jobs) = try database.withConnection(affinity: lane) { connection in
                try IngestStore().apply(all, app: app, on: connection)
            }
            var offset = 0
            for (index, pending) in round.enumerated() {
                let mine = Array(outcomes[offset..<offset + pending.items.count])
                offset += pending.items.count
                pending.result = .success(Result(outcomes: mine, jobsProduced: index == 0 ? jobs : 0, combined: round.count))
            }
        } catch {
            for pending in round { pending.result = .failure(error) }
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
