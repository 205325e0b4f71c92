import Foundation
import Postgres
import Synchronization
@testable import HeraldTestSupport
import Testing

/// SPEC §8–9: jobs produced at ingest, and the jobs API.
@Suite("Jobs", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct JobsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func app(members: [String]) throws -> TestApp {
        try environment.makeApp(prefix: "jobs", members: members, joinedAt: past - 100_000)
    }

    func claim(_ app: TestApp, max: Int = 100, lease: Int = 30, wait: Int = 0) throws -> [[String: Any]] {
        let response = try client.post("/v1/jobs/claim", token: app.workerKey,
                                       json: #"{"max": \#(max), "leaseSeconds": \#(lease), "waitSeconds": \#(wait)}"#)
        #expect(response.status == 200, "\(response.text)")
        return response.json["jobs"] as? [[String: Any]] ?? []
    }

    func post(_ path: String, _ app: TestApp, _ body: Any) throws -> HTTPResult {
        try client.post(path, token: app.workerKey, json: Events.json(body))
    }

    func stats(_ app: TestApp) throws -> [String: Int] {
        try client.get("/v1/jobs/stats", token: app.workerKey).json as? [String: Int] ?? [:]
    }

    @Test("a reply produces one job per notified member with reason, templates and badge; redelivery adds none")
    func producedAtIngest() throws {
        let app = try app(members: ["alice", "bob", "carol", "dave"])
        _ = try client.send("PATCH", "/v1/users/dave/preferences", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(#"{"groupPreferences": {"replies": "SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}"#.utf8))
        let events = [Events.message("e1", id: "m7", sender: "bob", at: past, text: "plan?"),
                      Events.message("e2", id: "m42", sender: "alice", parent: "m7", at: past + 10, text: "hi", mentions: ["carol"])]
        try app.ingest(events, client: client)
        try app.ingest(events, client: client, accepted: 0)  // redelivered: both duplicates
        let jobs = try claim(app)
        let replyJobs = jobs.filter { ($0["data"] as? [String: Any])?["messageId"] as? String == "m42" }
        #expect(Set(replyJobs.compactMap { $0["recipient"] as? String }) == ["bob", "carol"], "dave only wants subscribed threads")
        let carol = try #require(replyJobs.first { $0["recipient"] as? String == "carol" })
        #expect(carol["reason"] as? String == "mention")
        #expect(carol["kind"] as? String == "reply")
        #expect(carol["attempt"] as? Int == 1)
        #expect(carol["app"] as? String == app.id)
        #expect((carol["event"] as? [String: Any])?["id"] as? String == "e2")
        let notification = try #require(carol["notification"] as? [String: Any])
        #expect(notification["title"] as? String == "alice @ g1")
        #expect(notification["body"] as? String == "alice mentioned you: hi")
        #expect(notification["tag"] as? String == "m42")
        #expect(notification["collapseId"] as? String == "m42")
        #expect(notification["badge"] as? Int == 1)
        let data = try #require(carol["data"] as? [String: Any])
        #expect(data["parentMessageId"] as? String == "m7")
        #expect(data["conversationId"] as? String == "group_g1")
        #expect(data["sender"] as? String == "alice")
        #expect((replyJobs.first { $0["recipient"] as? String == "bob" })?["reason"] as? String == "subscribedThread")
        let rows = try environment.connection().query(
            """
            SELECT count(*), count(DISTINCT (coalesce(j.event_source, m.event_source), coalesce(j.event_id, m.event_id), j.recipient))
              FROM jobs j JOIN messages m ON m.app = j.app AND m.id = j.message_id WHERE j.app = \(app.id)
            """)
        #expect(try rows[0].decode(0, as: Int.self) == rows[0].decode(1, as: Int.self), "at most one job per (event, recipient)")
        #expect(try rows[0].decode(0, as: Int.self) == jobs.count)
    }

    @Test("privacy templates, muted conversations and custom messages")
    func templatesAndQuiet() throws {
        let app = try app(members: ["alice", "bob", "carol"])
        _ = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(#"{"privacyTemplateMode": "PRIVACY"}"#.utf8))
        _ = try client.send("PUT", "/v1/users/carol/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(#"{"conversations": [{"id": "g1", "type": "group", "until": \#(nowMilliseconds() + 600_000)}]}"#.utf8))
        var custom = Events.message("e2", id: "m2", sender: "alice", at: past + 1)
        var data = custom["data"] as! [String: Any]
        data["category"] = "custom"
        custom["data"] = data
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "secret"), custom], client: client)
        let jobs = try claim(app)
        #expect(jobs.count == 1, "bob only: carol muted the group, the custom message notifies nobody")
        let notification = try #require(jobs.first?["notification"] as? [String: Any])
        #expect(notification["title"] as? String == "New message")
        #expect(notification["body"] as? String == "You have a new message")
        #expect(!(Events.json(jobs[0])).contains("secret"))
    }

    @Test("four concurrent claimers over 10,000 jobs get disjoint jobs and every job is acked once")
    func concurrentClaimers() throws {
        let members = (0..<101).map { "m\($0)" }
        let app = try app(members: members)
        let messages = (0..<100).map { Events.message("e\($0)", id: "msg\($0)", sender: "m0", at: past + Int64($0)) }
        try app.ingest(messages, client: client)
        #expect(try stats(app)["ready"] == 10_000)
        let claimed = Mutex<[String]>([])
        let acked = Mutex<Int>(0)
        let workers = (0..<4).map { _ in
            Thread.detachNewThreadResult { () -> Bool in
                let client = environment.client
                while true {
                    guard let response = try? client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 100}"#),
                          let jobs = response.json["jobs"] as? [[String: Any]] else { return false }
                    if jobs.isEmpty { return true }
                    let ids = jobs.compactMap { $0["id"] as? String }
                    claimed.withLock { $0 += ids }
                    let body = Events.json(["jobs": jobs.map { ["id": $0["id"]!, "attempt": $0["attempt"]!] }])
                    guard let ack = try? client.post("/v1/jobs/ack", token: app.workerKey, json: body) else { return false }
                    acked.withLock { $0 += ack.json["acked"] as? Int ?? 0 }
                }
            }
        }
        for worker in workers { #expect(worker.wait(seconds: 120) == true) }
        let all = claimed.withLock { $0 }
        #expect(all.count == 10_000)
        #expect(Set(all).count == 10_000, "no job was held by two workers")
        #expect(acked.withLock { $0 } == 10_000)
        #expect(try stats(app) == ["ready": 0, "leased": 0, "retrying": 0, "dead": 0, "oldestReadyAgeMs": 0])
    }

    @Test("an expired lease returns the job; the stale ack of the first attempt is refused")
    func leaseExpiry() throws {
        let app = try app(members: ["alice", "bob"])
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past)], client: client)
        let first = try #require(try claim(app, lease: 1).first)
        #expect(try claim(app).isEmpty, "leased jobs are not handed out twice")
        // the job comes back once the 1 s lease has run out
        var returned: [[String: Any]] = []
        #expect(try eventually(seconds: 10) { returned = try claim(app); return !returned.isEmpty })
        let second = try #require(returned.first)
        #expect(second["id"] as? String == first["id"] as? String)
        #expect(second["attempt"] as? Int == 2)
        let stale = try post("/v1/jobs/ack", app, ["jobs": [["id": first["id"]!, "attempt": 1]]])
        #expect(stale.json["acked"] as? Int == 0)
        #expect(stale.json["stale"] as? [String] == [first["id"] as! String])
        let fresh = try post("/v1/jobs/ack", app, ["jobs": [["id": second["id"]!, "attempt": 2]]])
        #expect(fresh.json["acked"] as? Int == 1)
        let again = try post("/v1/jobs/ack", app, ["jobs": [["id": second["id"]!, "attempt": 2]]])
        #expect(again.json["stale"] as? [String] == [second["id"] as! String], "an acked job is stale")
    }

    @Test("fail: retry after backoff, dead at maxAttempts or when not retryable, then requeue from 0")
    func failDeadRequeue() throws {
        let app = try app(members: ["alice", "bob", "carol"])
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past)], client: client)
        let jobs = try claim(app)
        #expect(jobs.count == 2)
        let retry = try post("/v1/jobs/fail", app, ["jobs": [
            ["id": jobs[0]["id"]!, "attempt": 1, "error": "push service 503", "retryable": true, "retryAfterSeconds": 0],
            ["id": jobs[1]["id"]!, "attempt": 1, "error": "token unregistered", "retryable": false],
        ]])
        #expect(retry.json["retrying"] as? Int == 1)
        #expect(retry.json["dead"] as? Int == 1)
        // Backoff without retryAfterSeconds: the job waits ("retrying") before it is ready again.
        var job = try #require(try claim(app).first)
        _ = try post("/v1/jobs/fail", app, ["jobs": [["id": job["id"]!, "attempt": job["attempt"]!, "error": "again"]]])
        #expect(try stats(app)["retrying"] == 1)
        #expect(try claim(app).isEmpty)
        // Attempts up to maxAttempts (8): the eighth failure is dead.
        try environment.connection().query("UPDATE job_rows SET available_at = 0 WHERE app = \(app.id) AND state = 'ready'")
        for attempt in 3...8 {
            job = try #require(try claim(app).first)
            #expect(job["attempt"] as? Int == attempt)
            let failed = try post("/v1/jobs/fail", app, ["jobs": [["id": job["id"]!, "attempt": attempt, "error": "e\(attempt)", "retryAfterSeconds": 0]]])
            #expect(failed.json[attempt == 8 ? "dead" : "retrying"] as? Int == 1)
        }
        #expect(try stats(app)["dead"] == 2)
        let dead = try client.get("/v1/jobs/dead", token: app.workerKey)
        let list = dead.json["data"] as? [[String: Any]] ?? []
        #expect(list.count == 2)
        #expect(Set(list.compactMap { $0["lastError"] as? String }) == ["token unregistered", "e8"])
        let oldIDs = list.compactMap { $0["id"] as? String }
        let requeue = try post("/v1/jobs/dead/requeue", app, ["ids": oldIDs])
        #expect(requeue.json["requeued"] as? Int == 2)
        let again = try claim(app)
        #expect(again.count == 2)
        #expect(again.allSatisfy { $0["attempt"] as? Int == 1 }, "attempts start again")
        #expect(Set(again.compactMap { $0["id"] as? String }).isDisjoint(with: oldIDs), "a requeued job has a new id")
        let oldAck = try post("/v1/jobs/ack", app, ["jobs": oldIDs.map { ["id": $0, "attempt": 1] }])
        #expect(oldAck.json["acked"] as? Int == 0, "a worker holding the old life cannot ack the new one")
        let huge = try post("/v1/jobs/ack", app, ["jobs": [["id": oldIDs[0], "attempt": 3_000_000_000]]])
        #expect(huge.status == 400)
    }

    @Test("deleting a message cancels its unclaimed jobs; a parent's deletion cancels its replies' too")
    func cancellation() throws {
        let app = try app(members: ["alice", "bob", "carol"])
        try app.ingest([Events.message("e1", id: "m7", sender: "alice", at: past),
                          Events.message("e2", id: "r1", sender: "bob", parent: "m7", at: past + 1)], client: client)
        let claimed = try claim(app, max: 1)
        #expect(claimed.count == 1)
        try app.ingest([Events.delete("d1", id: "m7", at: past + 2)], client: client)
        let rows = try environment.connection().query(
            "SELECT state, count(*) FROM jobs WHERE app = \(app.id) GROUP BY state ORDER BY state")
        let states = Dictionary(uniqueKeysWithValues: try rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: Int.self)) })
        #expect(states["leased"] == 1, "a claimed job is the worker's")
        #expect(states["cancelled"] == 3)
        let after = try claim(app)
        #expect(after.map { $0["kind"] as? String } == ["retract"] && after.first?["recipient"] as? String == claimed.first?["recipient"] as? String,
                "only the retraction of the one already claimed (SPEC §11.4)")
    }

    @Test("claim parameters are validated; waitSeconds returns when a job arrives")
    func claimParameters() throws {
        let app = try app(members: ["alice", "bob"])
        for body in [#"{"max": 0}"#, #"{"max": 1001}"#, #"{"leaseSeconds": 0}"#, #"{"waitSeconds": 31}"#] {
            let response = try client.post("/v1/jobs/claim", token: app.workerKey, json: body)
            #expect(response.status == 400)
            #expect(response.errorCode == "ERR_INVALID_LIMIT")
        }
        // A wrong JSON type is a bad request, not a range (SPEC §3; issue 12 item 12).
        for body in [#"{"max": "ten"}"#, #"{"waitSeconds": true}"#, #"{"leaseSeconds": 1.5}"#] {
            let response = try client.post("/v1/jobs/claim", token: app.workerKey, json: body)
            #expect(response.status == 400)
            #expect(response.errorCode == "ERR_BAD_REQUEST", "\(body)")
        }
        let started = Date()
        let waiting = Thread.detachNewThreadResult { () -> Int in
            (try? HTTPClient(port: environment.server.port).post("/v1/jobs/claim", token: app.workerKey, json: #"{"waitSeconds": 10}"#))
                .flatMap { ($0.json["jobs"] as? [Any])?.count } ?? -1
        }
        let waiter = environment.server.service.services.jobWaiter
        #expect(eventually(seconds: 5) { waiter.waitingCount >= 1 }, "the claim waits before the job arrives")
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past)], client: client)
        #expect(waiting.wait(seconds: 15) == 1)
        #expect(Date().timeIntervalSince(started) < 5, "woke when the job arrived, not at the end of the wait")
        #expect(try client.post("/v1/jobs/claim", token: app.ingestKey, json: "{}").status == 403)
    }

    @Test("an edit notifies only the users it newly mentions, with reason mention (the others already pushed get an update)")
    func editMentions() throws {
        let app = try app(members: ["alice", "bob", "carol", "dave"])
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1, text: "hi", mentions: ["carol"])],
                         client: client)
        _ = try claim(app, max: 1000)
        try app.ingest([Events.edit("e3", id: "r1", sender: "alice", parent: "m7", at: past + 100, mentions: ["carol", "dave"],
                                      text: "hi both")], client: client)
        let all = try claim(app)
        // Those already pushed r1 get its new body as an update (SPEC §11.4); carol, mentioned
        // before, among them.
        #expect(all.filter { $0["kind"] as? String == "update" }.contains { $0["recipient"] as? String == "carol" })
        let jobs = all.filter { $0["kind"] as? String != "update" }
        #expect(jobs.count == 1)
        #expect(jobs.first?["recipient"] as? String == "dave")
        #expect(jobs.first?["reason"] as? String == "mention")
        #expect(jobs.first?["kind"] as? String == "reply")
        #expect((jobs.first?["event"] as? [String: Any])?["type"] as? String == "message.edited")
        #expect((jobs.first?["notification"] as? [String: Any])?["body"] as? String == "alice mentioned you: hi both")
    }

    @Test("a job is built when it is claimed: an unclaimed job shows the edited text, a claimed one keeps what it showed")
    func payloadAtClaim() throws {
        let app = try app(members: ["alice", "bob", "carol"])
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "first")], client: client)
        let first = try claim(app, max: 1)
        #expect((first.first?["notification"] as? [String: Any])?["body"] as? String == "first")
        try app.ingest([Events.edit("e2", id: "m1", sender: "alice", at: past + 100, mentions: nil, text: "second")], client: client)
        let claimedAndUpdates = try claim(app)
        // The job already claimed gets an update (SPEC §11.4); the one left shows the new text.
        #expect(claimedAndUpdates.filter { $0["kind"] as? String == "update" }.map { $0["recipient"] as? String }
                    == [first.first?["recipient"] as? String])
        let rest = claimedAndUpdates.filter { $0["kind"] as? String != "update" }
        #expect(rest.count == 1, "one job left, the edit adds no notification")
        let notification = rest.first?["notification"] as? [String: Any]
        #expect(notification?["body"] as? String == "second")
        #expect(notification?["title"] as? String == "alice @ g1")
        #expect(notification?["tag"] as? String == "m1" && notification?["collapseId"] as? String == "m1")
        let data = rest.first?["data"] as? [String: Any]
        #expect(data?["messageId"] as? String == "m1" && data?["receiver"] as? String == "g1" && data?["sender"] as? String == "alice")
        #expect(data?["sentAt"] as? Int == Int(past) && data?["parentMessageId"] is NSNull)
        #expect((rest.first?["event"] as? [String: Any])?["id"] as? String == "e1", "the job's event is the message's creation")
        #expect(rest.first?["kind"] as? String == "message")
    }

    @Test("explain: the decision, its reason, the job id and the steps; 404 for unknown messages")
    func explain() throws {
        let app = try app(members: ["alice", "bob", "carol"])
        _ = try client.send("PUT", "/v1/users/carol/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(#"{"conversations": [{"id": "g1", "type": "group", "until": \#(nowMilliseconds() + 600_000)}]}"#.utf8))
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past)], client: client)
        let bob = try client.get("/v1/users/bob/messages/m1/routing", token: app.serverKey)
        #expect(bob.status == 200)
        #expect(bob.json["notified"] as? Bool == true)
        #expect(bob.json["reason"] as? String == "allMessages")
        #expect((bob.json["jobId"] as? String)?.hasPrefix("j") == true)
        #expect((bob.json["steps"] as? [String])?.isEmpty == false)
        let carol = try client.get("/v1/users/carol/messages/m1/routing", token: app.serverKey)
        #expect(carol.json["notified"] as? Bool == false)
        #expect(carol.json["reason"] as? String == "MUTE_PREFERENCE")
        #expect(carol.json["jobId"] is NSNull)
        #expect(try client.get("/v1/users/alice/messages/m1/routing", token: app.serverKey).json["reason"] as? String == "SENDER")
        #expect(try client.get("/v1/users/mallory/messages/m1/routing", token: app.serverKey).json["reason"] as? String == "NO_ACCESS")
        let unknown = try client.get("/v1/users/bob/messages/nope/routing", token: app.serverKey)
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == "ERR_MESSAGE_ID_NOT_FOUND")
    }

    @Test("a republished edit notifies nobody again; deleted threads and groups produce and keep no jobs")
    func noStrayJobs() throws {
        let app = try app(members: ["alice", "bob", "carol", "dave"])
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 1)], client: client)
        _ = try claim(app, max: 1000)
        let edit = Events.edit("e3", id: "r1", sender: "alice", parent: "m7", at: past + 100, mentions: ["dave"])
        var republished = edit
        republished["id"] = "e3-again"
        try app.ingest([edit], client: client)
        try app.ingest([republished], client: client)
        #expect(try claim(app).filter { $0["kind"] as? String != "update" }.count == 1, "one job for dave, not two")
        // A reply to a deleted parent notifies nobody.
        try app.ingest([Events.delete("d1", id: "m7", at: past + 200),
                          Events.message("e4", id: "r2", sender: "carol", parent: "m7", at: past + 300)], client: client)
        #expect(try claim(app).allSatisfy { $0["kind"] as? String == "retract" }, "retractions of what was pushed, no notification")
        // group.deleted cancels jobs not yet claimed.
        try app.ingest([Events.message("e5", id: "m8", sender: "bob", at: past + 400)], client: client)
        try app.ingest([Events.event("e6", "group.deleted", ["guid": "g1", "at": past + 500])], client: client)
        #expect(try claim(app).isEmpty)
    }

    @Test("twenty waiting claims hold no server thread: other requests are served meanwhile, and each wait ends")
    func manyLongPolls() throws {
        let app = try app(members: ["alice", "bob"])
        let port = environment.server.port
        let waits = (0..<20).map { _ in
            Thread.detachNewThreadResult { () -> Int in
                (try? HTTPClient(port: port).post("/v1/jobs/claim", token: app.workerKey, json: #"{"waitSeconds": 3, "max": 1}"#))
                    .flatMap { $0.status == 200 ? ($0.json["jobs"] as? [Any])?.count : nil } ?? -1
            }
        }
        let waiter = environment.server.service.services.jobWaiter
        #expect(eventually(seconds: 5) { waiter.waitingCount >= 20 }, "all 20 claims wait")
        // The server has 8 threads and 20 claims wait: it still answers at once.
        let started = Date()
        for _ in 0..<10 { #expect(try client.get("/healthz").status == 200) }
        #expect(Date().timeIntervalSince(started) < 1)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past)], client: client)
        let results = waits.map { $0.wait(seconds: 10) }
        #expect(results.allSatisfy { $0 == 0 || $0 == 1 }, "every wait ended with 200: \(results)")
        #expect(results.filter { $0 == 1 }.count == 1, "the one job went to exactly one waiting claim")
    }
}
