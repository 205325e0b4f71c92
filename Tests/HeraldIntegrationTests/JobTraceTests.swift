import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
@testable import HeraldTestSupport
import Testing

/// Issue 40, item 7: an event's W3C `traceparent` reaches the `data` of every job it produced,
/// whether the job is claimed from a block, claimed again after a failure, or listed dead — so a
/// push can be traced from the bus to the device. An event without a valid one adds nothing.
@Suite("Traces in jobs", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct JobTraceTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws { environment = try TestEnvironment.shared() }

    @Test("a job's data carries its event's traceparent: block jobs, a reaction's job, a retry and a dead job")
    func traceInData() throws {
        let app = try environment.makeApp(prefix: "jobtrace")
        #expect(try app.setMembers("g1", ["alice", "bob", "carol"], client: client).status == 200)
        let now = nowMilliseconds()
        let messageTrace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        let reactionTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        var traced = Events.message("t-1", id: "m1", sender: "alice", at: now, text: "hi")
        traced["traceparent"] = messageTrace
        var invalid = Events.message("t-2", id: "m2", sender: "bob", at: now + 1, text: "yo")
        invalid["traceparent"] = "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01"   // upper case: not W3C's form
        var reaction = Events.reaction("t-3", id: "r1", message: "m1", reactor: "carol", at: now + 2, messageSender: "alice")
        reaction["traceparent"] = reactionTrace
        try app.ingest([traced, invalid, reaction], client: client)

        func claim() throws -> [[String: Any]] {
            try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 100}"#).json["jobs"] as? [[String: Any]] ?? []
        }
        func data(_ job: [String: Any]) -> [String: Any] { job["data"] as? [String: Any] ?? [:] }
        let jobs = try claim()
        let byMessage = Dictionary(grouping: jobs) { "\($0["kind"] as? String ?? "")/\(data($0)["messageId"] as? String ?? "")" }
        let m1 = byMessage["message/m1"] ?? [], m2 = byMessage["message/m2"] ?? [], reacted = byMessage["reaction/m1"] ?? []
        #expect(m1.count == 2 && m2.count == 2 && reacted.count == 1, "\(jobs)")
        #expect(m1.allSatisfy { data($0)["traceparent"] as? String == messageTrace }, "\(m1)")
        #expect(m2.allSatisfy { data($0)["traceparent"] == nil }, "an invalid traceparent is not passed on: \(m2)")
        #expect(reacted.first.map { data($0)["traceparent"] as? String } == reactionTrace, "\(reacted)")

        // One of m1's jobs fails for good, the other is retried: both keep the trace.
        guard m1.count == 2 else { return }
        let failures: [[String: Any]] = [["id": m1[0]["id"]!, "attempt": 1, "error": "gone", "retryable": false],
                                         ["id": m1[1]["id"]!, "attempt": 1, "error": "later", "retryAfterSeconds": 0]]
        let failed = try client.post("/v1/jobs/fail", token: app.workerKey, json: Events.json(["jobs": failures])).json
        #expect(failed["retrying"] as? Int == 1 && failed["dead"] as? Int == 1)
        let dead = try client.get("/v1/jobs/dead", token: app.workerKey).json["data"] as? [[String: Any]] ?? []
        #expect(dead.count == 1 && dead.first.map { data($0)["traceparent"] as? String } == messageTrace, "\(dead)")
        var retried: [[String: Any]] = []
        for _ in 0..<50 where retried.isEmpty {
            retried = try claim()
            if retried.isEmpty { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(retried.count == 1 && retried.first?["attempt"] as? Int == 2, "\(retried)")
        #expect(retried.first.map { data($0)["traceparent"] as? String } == messageTrace, "\(retried)")
    }
}
