import Foundation
import Glibc
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §8.3: fan-out above largeGroupThreshold runs outside the request, in chunks, exactly once.
@Suite("Large-group fan-out", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct LargeGroupTests {
    let past = nowMilliseconds() - 3_600_000

    func jobCount(_ connection: PostgresConnection, _ app: String) throws -> (Int, Int) {
        let rows = try connection.query(
            "SELECT count(*), count(DISTINCT recipient) FROM jobs WHERE app = \(app) AND message_id = 'big'")
        return (try rows[0].decode(0, as: Int.self), try rows[0].decode(1, as: Int.self))
    }

    @Test("above the threshold the jobs come from the background worker, one per member")
    func deferred() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let app = try environment.makeApp(prefix: "big")
        _ = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(#"{"largeGroupThreshold": 10}"#.utf8))
        #expect(try app.setMembers("g1", (0..<50).map { "u\($0)" }, client: client).status == 200)
        try app.ingest([Events.message("e1", id: "big", sender: "u0", at: past)], client: client)
        let connection = try environment.connection()
        let tasks = try connection.query("SELECT count(*) FROM fanout_tasks WHERE app = \(app.id)")
        #expect(try tasks[0].decode(0, as: Int.self) == 1, "the ingest transaction recorded a task")
        #expect(eventually(seconds: 20) { (try? jobCount(connection, app.id).0) == 49 })
        #expect(try jobCount(connection, app.id) == (49, 49))
        #expect(eventually(seconds: 10) {
            (try? connection.query("SELECT done FROM fanout_tasks WHERE app = \(app.id)")[0].decode(0, as: Bool.self)) == true
        })
    }

    @Test("reactions and member actions above the threshold go through the tasks too, one job per member")
    func reactionsAndMemberActions() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let app = try environment.makeApp(prefix: "big")
        let patched = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"""
                                          {"largeGroupThreshold": 10, "groupPreferences": {
                                             "reactions": {"value": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES", "userCanOverride": true},
                                             "memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}}}
                                          """#.utf8))
        #expect(patched.status == 200, "\(patched.text)")
        #expect(try app.setMembers("g1", (0..<50).map { "u\($0)" }, client: client).status == 200)
        try app.ingest([Events.message("e1", id: "big", sender: "u0", at: past),
                        // after the snapshot: a reaction notifies those with access at its time
                        Events.reaction("re1", id: "r1", message: "big", reactor: "u1", at: nowMilliseconds()),
                        Events.member("j1", "member.joined", uid: "newbie", at: past + 2)], client: client)
        let connection = try environment.connection()
        func count(_ kind: String) throws -> (Int, Int) {
            let rows = try connection.query("SELECT count(*), count(DISTINCT recipient) FROM jobs WHERE app = \(app.id) AND kind = \(kind)")
            return (try rows[0].decode(0, as: Int.self), try rows[0].decode(1, as: Int.self))
        }
        let tasks = try connection.query("SELECT count(*) FROM fanout_tasks WHERE app = \(app.id)")
        #expect(try tasks[0].decode(0, as: Int.self) == 3, "the message, the reaction and the join each recorded a task")
        #expect(eventually(seconds: 20) { (try? count("reaction").0) == 50 && (try? count("memberAction").0) == 50 })
        #expect(try count("reaction") == (50, 50), "every member but the reactor (newbie included: a member at its time)")
        #expect(try count("memberAction") == (50, 50), "every member but the one who joined")
        // a pin in the large group: a sync job for every member, through a task
        try app.ingest([Events.event("pin1", "message.pinned", ["messageId": "big", "by": "u2", "receiverType": "group", "receiver": "g1",
                                                                 "at": nowMilliseconds()])], client: client)
        #expect(eventually(seconds: 20) { (try? count("sync").0) == 51 })
        #expect(try count("sync") == (51, 51), "every member, the one who pinned included")
        #expect(eventually(seconds: 10) {
            (try? connection.query("SELECT bool_and(done) FROM fanout_tasks WHERE app = \(app.id)")[0].decode(0, as: Bool.self)) == true
        })
    }

    @Test("a 20,000-member group fan-out completes exactly once when the process is killed midway and restarted")
    func killedMidway() throws {
        let environment = try TestEnvironment.shared()
        // In a database of its own: the shared in-process server must not take the task (its
        // services are not stopped one by one), so the child processes are alone with it.
        try environment.withDatabaseOfItsOwn(prefix: "big20k") { databaseURL in
            let first = try ServerProcess(databaseURL: databaseURL, environment: ["HERALD_FANOUT_LEASE_SECONDS": "2"])
            let app = try environment.makeApp(prefix: "big20k", client: first.client)
            let members = (0..<20_000).map { String(format: "member%05d", $0) }
            #expect(try app.setMembers("g1", members, client: first.client).json["count"] as? Int == 20_000)

            let started = Date()
            let response = try app.post([Events.message("e1", id: "big", sender: "member00000", at: past, text: "all hands")],
                                        client: first.client)
            #expect(response.json["accepted"] as? Int == 1)
            let connection = try PostgresConnection(connectionString: databaseURL)
            defer { connection.close() }
            #expect(eventually(seconds: 60) { ((try? jobCount(connection, app.id).0) ?? 0) >= 3000 })
            first.signal(SIGKILL)
            _ = first.wait()
            let atKill = try jobCount(connection, app.id).0
            #expect(atKill < 19_999, "killed before the end (\(atKill) jobs)")

            let second = try ServerProcess(databaseURL: databaseURL, environment: ["HERALD_FANOUT_LEASE_SECONDS": "2"])
            #expect(eventually(seconds: 120) { (try? jobCount(connection, app.id).0) == 19_999 })
            let elapsed = Date().timeIntervalSince(started)
            usleep(500_000)
            let (jobs, recipients) = try jobCount(connection, app.id)
            #expect(jobs == 19_999, "every member but the sender")
            #expect(recipients == 19_999, "one job each")
            // The task is marked done by the round after its last chunk: it may trail the jobs a little.
            #expect(eventually(seconds: 10) {
                (try? connection.query("SELECT done FROM fanout_tasks WHERE app = \(app.id)").first?.decode(0, as: Bool.self)) == true
            }, "the task is done")
            print("large-group fan-out: 19,999 jobs in \(String(format: "%.1f", elapsed)) s including a kill and a restart")
            second.signal(SIGTERM)
            #expect(second.wait() == 0)
        }
    }
}
