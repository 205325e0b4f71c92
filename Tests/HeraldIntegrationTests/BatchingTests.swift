import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §4: the jobs that result from a set of events do not depend on how they are delivered.
/// Each message is routed against the state as of that message — the subscriptions its own
/// triggers create included, those of later messages not — and explain agrees with the job that
/// was (or was not) produced.
@Suite("Batching independence", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct BatchingTests {
    struct Job: Hashable, CustomStringConvertible {
        let event: String
        let recipient: String
        let reason: String
        var description: String { "\(event)→\(recipient) (\(reason))" }
    }

    static let members = ["u1", "u2", "u3", "u4", "u5", "u6", "u7"]

    /// A thread and 40 replies from random members, each mentioning nobody or one or two
    /// members. (Membership is judged now for candidates, SPEC §5.3, so the group is fixed.)
    static func history(seed: UInt64, base: Int64) -> (setup: [[String: Any]], events: [[String: Any]], replies: [(id: String, at: Int64)]) {
        var random = OrderIndependenceTests.Random(state: seed)
        var setup = members.enumerated().map { index, uid in
            Events.member("join-\(uid)", "member.joined", uid: uid, at: base - 100_000 + Int64(index))
        }
        setup.append(Events.message("c-p", id: "p", sender: "u1", at: base))
        var events: [[String: Any]] = []
        var replies: [(id: String, at: Int64)] = []
        for index in 0..<40 {
            let at = base + 1_000 + Int64(index) * 10
            let sender = members[Int.random(in: 1..<members.count, using: &random)]
            let mentions = members.filter { $0 != sender && Int.random(in: 0..<12, using: &random) == 0 }
            events.append(Events.message("c-r\(index)", id: "r\(index)", sender: sender, parent: "p", at: at, mentions: mentions))
            replies.append(("r\(index)", at))
        }
        return (setup, events, replies)
    }

    func deliver(_ events: [[String: Any]], setup: [[String: Any]], replies: String, batches: (inout OrderIndependenceTests.Random) -> Int,
                 seed: UInt64, environment: TestEnvironment) throws -> (app: TestApp, jobs: Set<Job>) {
        let app = try environment.makeApp(prefix: "batching")
        let client = environment.client
        let settings = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey,
                                       headers: ["Content-Type": "application/json"],
                                       body: Array(#"{"groupPreferences":{"replies":{"value":"\#(replies)"}}}"#.utf8))
        #expect(settings.status == 200, "\(settings.text)")
        #expect(try app.post(setup, client: client).status == 200)
        var random = OrderIndependenceTests.Random(state: seed)
        var index = 0
        while index < events.count {
            let size = batches(&random)
            let response = try app.post(Array(events[index..<min(events.count, index + size)]), client: client)
            #expect(response.status == 200)
            #expect(response.json["rejected"] as? Int == 0, "\(response.text)")
            index += size
        }
        var jobs: Set<Job> = []
        for row in try environment.connection().query(
            """
            SELECT coalesce(j.event_id, m.event_id) AS event, j.recipient, j.reason
              FROM jobs j JOIN messages m ON m.app = j.app AND m.id = j.message_id
             WHERE j.app = \(app.id) AND coalesce(j.event_id, m.event_id) LIKE 'c-r%'
            """) {
            jobs.insert(Job(event: try row.decode(0), recipient: try row.decode(1), reason: try row.decode(2)))
        }
        return (app, jobs)
    }

    @Test("one by one, as one batch and shuffled in random batches give the same jobs, and explain agrees",
          arguments: ["SUBSCRIBE_TO_SUBSCRIBED_THREADS", "SUBSCRIBE_TO_ALL"], [UInt64(11), 12])
    func sameJobs(replies: String, seed: UInt64) throws {
        let environment = try TestEnvironment.shared()
        let base = nowMilliseconds() - 3_600_000
        let (setup, events, replyTimes) = Self.history(seed: seed, base: base)
        let inOrder = try deliver(events.sorted { Self.time($0) < Self.time($1) }, setup: setup, replies: replies, batches: { _ in 1 }, seed: seed, environment: environment)
        let oneBatch = try deliver(events, setup: setup, replies: replies, batches: { _ in 1000 }, seed: seed, environment: environment)
        var random = OrderIndependenceTests.Random(state: seed)
        let shuffled = try deliver(events.shuffled(using: &random), setup: setup, replies: replies,
                                   batches: { Int.random(in: 1...9, using: &$0) }, seed: seed, environment: environment)
        #expect(!inOrder.jobs.isEmpty)
        for (name, other) in [("one batch", oneBatch.jobs), ("shuffled", shuffled.jobs)] {
            for job in inOrder.jobs.subtracting(other) { Issue.record("\(replies) seed \(seed): \(name) lacks \(job)") }
            for job in other.subtracting(inOrder.jobs) { Issue.record("\(replies) seed \(seed): \(name) has an extra \(job)") }
        }
        if replies == "SUBSCRIBE_TO_SUBSCRIBED_THREADS" {
            // A member who never replied nor was mentioned before reply n has no job for it
            // unless it mentions them: every job's recipient had subscribed by then.
            for job in inOrder.jobs where job.reason == "subscribedThread" {
                let n = Int(job.event.dropFirst(3))!
                let earlier = events.prefix { Self.time($0) <= replyTimes[n].at }.filter { ($0["type"] as! String) == "message.created" }
                let subscribedBefore = job.recipient == "u1" || earlier.contains { event in
                    let data = event["data"] as! [String: Any]
                    return data["sender"] as? String == job.recipient || (data["mentions"] as? [String] ?? []).contains(job.recipient)
                }
                #expect(subscribedBefore, "\(job): the recipient subscribed only after that reply")
            }
        }
        // Explain agrees with the jobs of the shuffled delivery, for every (reply, member).
        let client = environment.client
        for (id, _) in replyTimes.prefix(12) {
            for uid in Self.members {
                let explained = try client.get("/v1/users/\(uid)/messages/\(id)/routing", token: shuffled.app.serverKey)
                #expect(explained.status == 200)
                let hasJob = shuffled.jobs.contains { $0.event == "c-" + id && $0.recipient == uid }
                #expect(explained.json["notified"] as? Bool == hasJob, "\(uid) \(id): explain \(explained.text), job \(hasJob)")
            }
        }
    }

    static func time(_ event: [String: Any]) -> Int64 {
        let data = event["data"] as! [String: Any]
        return (data["sentAt"] ?? data["at"]) as! Int64
    }
}
