import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §4/§5.1: the subscription state that results from a set of events does not depend on
/// the order in which they arrive, and equals what a small reference model computes by
/// applying the rules in time order.
@Suite("Order independence", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct OrderIndependenceTests {
    /// SplitMix64: a seeded generator, so a failing history can be replayed.
    struct Random: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    struct Key: Hashable, CustomStringConvertible {
        let uid: String
        let thread: String
        var description: String { "\(uid)@\(thread)" }
    }

    struct Row: Equatable, CustomStringConvertible {
        var subscribed: Bool
        var reason: String?
        var since: Int64?
        var description: String { subscribed ? "subscribed(\(reason ?? "?"), \(since ?? -1))" : "unsubscribed" }
    }

    /// A generated history: events before the unsubscribes, the unsubscribes, and the rest.
    struct History {
        var first: [[String: Any]] = []
        var rest: [[String: Any]] = []
        var unsubscribes: [Key] = []
    }

    static let members = ["u1", "u2", "u3", "u4"]
    static let everyone = ["u1", "u2", "u3", "u4", "u5", "u6"]

    static func generate(seed: UInt64, base: Int64) -> History {
        var random = Random(state: seed)
        var history = History()
        var clock: Int64 = 0
        // Old times are before any API call of the test; new times are after all of them.
        func time(old: Bool) -> Int64 {
            clock += Int64.random(in: 1...3, using: &random)
            return old ? base - 1_000_000 + clock : base + 3_600_000 + clock
        }
        for (index, uid) in members.enumerated() {
            history.first.append(Events.member("join-\(uid)", "member.joined", uid: uid, at: base - 2_000_000 + Int64(index)))
        }
        let threads = ["p1", "p2", "p3"]
        for thread in threads {
            let sender = members.randomElement(using: &random)!
            let mentions = everyone.filter { _ in Int.random(in: 0..<5, using: &random) == 0 }
            history.first.append(Events.message("c-\(thread)", id: thread, sender: sender, at: time(old: true), mentions: mentions))
        }
        var replies: [(id: String, thread: String, sender: String, at: Int64)] = []
        var usedEditTimes: Set<String> = []
        for index in 0..<40 {
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<5:
                let thread = threads.randomElement(using: &random)!
                let sender = everyone.dropLast().randomElement(using: &random)!
                let at = time(old: Bool.random(using: &random))
                let mentions = everyone.filter { _ in Int.random(in: 0..<4, using: &random) == 0 }
                let id = "r\(index)"
                replies.append((id, thread, sender, at))
                history.rest.append(Events.message("c-\(id)", id: id, sender: sender, parent: thread, at: at,
                                                   mentions: mentions, mentionsAll: Int.random(in: 0..<6, using: &random) == 0))
            case 5..<7 where !replies.isEmpty:
                let reply = replies.randomElement(using: &random)!
                // Edits of one message at distinct times, after the message.
                var at = max(reply.at + 1, time(old: Bool.random(using: &random)))
                while usedEditTimes.contains("\(reply.id)@\(at)") { at += 1 }
                usedEditTimes.insert("\(reply.id)@\(at)")
                let mentions = everyone.filter { _ in Int.random(in: 0..<3, using: &random) == 0 }
                history.rest.append(Events.edit("e-\(index)", id: reply.id, sender: reply.sender, parent: reply.thread,
                                                at: at, mentions: mentions))
            case 7 where !replies.isEmpty:
                let reply = replies.randomElement(using: &random)!
                history.rest.append(Events.delete("d-\(index)", id: reply.id, parent: reply.thread, at: reply.at + 5))
            default:
                let uid = everyone.randomElement(using: &random)!
                let type = ["member.joined", "member.left", "member.kicked", "member.added"].randomElement(using: &random)!
                history.rest.append(Events.member("m-\(index)", type, uid: uid, at: time(old: Bool.random(using: &random))))
            }
        }
        var chosen: Set<Key> = []
        while chosen.count < 5 {
            chosen.insert(Key(uid: members.randomElement(using: &random)!, thread: threads.randomElement(using: &random)!))
        }
        history.unsubscribes = Array(chosen).sorted { $0.description < $1.description }
        return history
    }

    /// The rules of SPEC §5.1 applied in time order, one trigger at a time.
    static func model(_ history: History, unsubscribeAt: Int64) -> [Key: Row] {
        let events = history.first + history.rest
        var created: [String: [String: Any]] = [:]
        var versions: [String: [(at: Int64, mentions: [String])]] = [:]
        var joins: [String: [Int64]] = [:]
        var removals: [String: [Int64]] = [:]
        for event in events {
            let data = event["data"] as! [String: Any]
            switch event["type"] as! String {
            case "message.created":
                let id = data["id"] as! String
                if created[id] == nil {
                    created[id] = data
                    versions[id, default: []].append((data["sentAt"] as! Int64, data["mentions"] as! [String]))
                    joins[data["sender"] as! String, default: []].append(data["sentAt"] as! Int64)
                }
            case "message.edited":
                versions[data["id"] as! String, default: []].append((data["editedAt"] as! Int64, data["mentions"] as! [String]))
            case "member.joined", "member.added":
                joins[data["uid"] as! String, default: []].append(data["at"] as! Int64)
            case "member.left", "member.kicked", "member.banned":
                removals[data["uid"] as! String, default: []].append(data["at"] as! Int64)
            default:
                break
            }
        }
        func member(_ uid: String, at t: Int64) -> Bool {
            guard let join = joins[uid, default: []].filter({ $0 <= t }).max() else { return false }
            guard let removal = removals[uid, default: []].filter({ $0 <= t }).max() else { return true }
            return join > removal
        }
        // (time, priority, kind, key): reply 1, mention 2, started 3, unsubscribe at U.
        var triggers: [(at: Int64, priority: Int, kind: String, key: Key)] = []
        for (id, data) in created {
            let sender = data["sender"] as! String
            let at = data["sentAt"] as! Int64
            let thread = data["parentId"] as? String ?? id
            if data["parentId"] == nil {
                triggers.append((at, 3, "started", Key(uid: sender, thread: id)))
            } else {
                triggers.append((at, 1, "reply", Key(uid: sender, thread: thread)))
                if let author = created[thread]?["sender"] as? String {
                    triggers.append((at, 3, "started", Key(uid: author, thread: thread)))
                }
            }
            var previous: [String] = []
            for version in versions[id, default: []].sorted(by: { $0.at < $1.at }) {
                for uid in version.mentions where !previous.contains(uid) && uid != sender && member(uid, at: version.at) {
                    triggers.append((version.at, 2, "mention", Key(uid: uid, thread: thread)))
                }
                previous = version.mentions
            }
        }
        for key in history.unsubscribes { triggers.append((unsubscribeAt, 0, "unsubscribe", key)) }
        triggers.sort { ($0.at, $0.priority) < ($1.at, $1.priority) }

        var rows: [Key: Row] = [:]
        var unsubscribedAt: [Key: Int64] = [:]
        for trigger in triggers {
            let existing = rows[trigger.key]
            switch trigger.kind {
            case "unsubscribe":
                rows[trigger.key] = Row(subscribed: false, reason: nil, since: nil)
                unsubscribedAt[trigger.key] = trigger.at
            case "started":
                if existing == nil { rows[trigger.key] = Row(subscribed: true, reason: "started", since: trigger.at) }
            default:
                if existing == nil || (existing?.subscribed == false && trigger.at > unsubscribedAt[trigger.key, default: .min]) {
                    rows[trigger.key] = Row(subscribed: true, reason: trigger.kind, since: trigger.at)
                }
            }
        }
        return rows
    }

    /// The events of a history that touch a key, for failure messages.
    static func relevant(_ history: History, to key: Key) -> [String] {
        (history.first + history.rest).filter { event in
            let data = event["data"] as! [String: Any]
            let mentions = data["mentions"] as? [String] ?? []
            return data["uid"] as? String == key.uid || data["sender"] as? String == key.uid || mentions.contains(key.uid)
                || data["id"] as? String == key.thread || data["parentId"] as? String == key.thread
        }.map { Events.json($0) }
    }

    /// Delivers the history in the order `seed` picks, with duplicates, in random batch sizes.
    func deliver(_ history: History, seed: UInt64, environment: TestEnvironment) throws -> [Key: Row] {
        var random = Random(state: seed)
        let app = try environment.makeApp(prefix: "order")
        let client = environment.client
        func post(_ events: [[String: Any]]) throws {
            var index = 0
            while index < events.count {
                let size = Int.random(in: 1...15, using: &random)
                let batch = Array(events[index..<min(events.count, index + size)])
                let response = try app.post(batch, client: client)
                #expect(response.status == 200)
                #expect(response.json["rejected"] as? Int == 0, "\(response.text)")
                index += size
            }
        }
        try post(history.first.shuffled(using: &random))
        for key in history.unsubscribes {
            let response = try client.delete("/v1/users/\(key.uid)/threads/\(key.thread)/subscription", token: app.serverKey)
            #expect(response.status == 200, "unsubscribe \(key): \(response.text)")
        }
        var rest = history.rest
        for _ in 0..<(rest.count / 3) {
            rest.append((history.first + history.rest).randomElement(using: &random)!)   // redeliveries
        }
        try post(rest.shuffled(using: &random))

        var rows: [Key: Row] = [:]
        for row in try environment.connection().query(
            "SELECT uid, thread_id, subscribed, reason, since FROM subscriptions WHERE app = \(app.id)") {
            let subscribed = try row.decode(2, as: Bool.self)
            rows[Key(uid: try row.decode(0), thread: try row.decode(1))] = Row(
                subscribed: subscribed, reason: subscribed ? try row.decode(3) : nil, since: subscribed ? try row.decode(4) : nil)
        }
        return rows
    }

    @Test("random histories delivered in random orders with duplicates give the reference model's state",
          arguments: [UInt64(1), 2, 3, 4, 5, 6, 7, 8, 9, 10])
    func randomHistories(seed: UInt64) throws {
        let environment = try TestEnvironment.shared()
        let base = nowMilliseconds()
        let history = Self.generate(seed: seed, base: base)
        let expected = Self.model(history, unsubscribeAt: base + 1)
        #expect(expected.values.contains { $0.subscribed }, "the history subscribes someone")
        var results: [[Key: Row]] = []
        for order in 0..<3 {
            let actual = try deliver(history, seed: seed * 1000 + UInt64(order), environment: environment)
            for key in Set(expected.keys).union(actual.keys) where expected[key] != actual[key] {
                Issue.record("""
                    seed \(seed) order \(order): \(key) expected \(expected[key]?.description ?? "no row"), \
                    got \(actual[key]?.description ?? "no row"); relevant events:
                    \(Self.relevant(history, to: key).joined(separator: "\n"))
                    """)
            }
            results.append(actual)
        }
        #expect(results.allSatisfy { $0 == results[0] }, "every order gives the same state")
    }
}
