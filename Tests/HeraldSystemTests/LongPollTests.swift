import Foundation
@testable import HeraldTestSupport
import Testing

extension HeavyTests {
    /// Issue 32, items 6–7: a crowd of long polls (SPEC §9 claims, §14 feeds with `waitSeconds`) is
    /// woken by every change that concerns it, and cannot take the connections that short requests
    /// need.
    @Suite("Long-poll crowds", .serialized)
    struct LongPollTests {
        @Test("1,000 users long-poll their feeds and one message mentions them all: every one is answered with its change")
        func everyWakeUpArrives() throws {
            let environment = try TestEnvironment.shared()
            let client = environment.client
            let app = try environment.makeApp(prefix: "crowd")
            let users = (0..<1000).map { String(format: "w%04d", $0) }
            #expect(try app.setMembers("g1", ["boss"] + users, client: client).status == 200)
            let cursors = try users.map { try HeavyTests.startCursor(app, $0, client: client) }
            let fds = try zip(users, cursors).map { uid, cursor in
                try client.open("GET", "/v1/users/\(uid)/changes?waitSeconds=20&cursor=\(cursor)", token: app.serverKey)
            }
            // every feed is waiting before the change
            #expect(eventually(seconds: 20) { environment.server.service.services.changeWaiter.waitingCount == 1000 })
            let started = Date()
            try app.ingest([Events.message("all", id: "all", sender: "boss", at: nowMilliseconds() + 1, text: "everyone",
                                           mentions: users)], client: client)
            let answers = client.collect(fds, seconds: 25)
            let elapsed = Date().timeIntervalSince(started)
            let woken = answers.filter { answer in
                let items = answer?.json["data"] as? [[String: Any]] ?? []
                return answer?.status == 200 && items.first?["type"] as? String == "subscription"
            }.count
            #expect(woken == 1000, "every waiting feed got the mention's subscription (\(woken) of 1,000)")
            print("long polls: 1,000 waiting feeds answered with their change in \(String(format: "%.2f", elapsed)) s")
        }

        @Test("300 claims long-poll and one message makes 300 jobs: every claim gets a job")
        func everyClaimIsWoken() throws {
            let environment = try TestEnvironment.shared()
            let client = environment.client
            let app = try environment.makeApp(prefix: "claims")
            let users = (0..<300).map { String(format: "c%04d", $0) }
            #expect(try app.setMembers("g1", ["boss"] + users, client: client).status == 200)
            let fds = try (0..<300).map { _ in
                try client.open("POST", "/v1/jobs/claim", token: app.workerKey, json: #"{"max": 1, "waitSeconds": 20}"#)
            }
            #expect(eventually(seconds: 20) { environment.server.service.services.jobWaiter.waitingCount == 300 })
            try app.ingest([Events.message("hi", id: "hi", sender: "boss", at: nowMilliseconds() + 1, text: "hello")], client: client)
            let answers = client.collect(fds, seconds: 25)
            let claimed = answers.map { ($0?.json["jobs"] as? [[String: Any]])?.count ?? 0 }
            #expect(claimed.reduce(0, +) == 300 && claimed.allSatisfy { $0 == 1 }, "each waiting claim got one of the 300 jobs: \(claimed.filter { $0 != 1 }.count) did not")
        }

        @Test("2,000 long polls of one app: those beyond its share get 429 at once, and /healthz and ingest are answered meanwhile")
        func longPollsLeaveRoom() throws {
            let environment = try TestEnvironment.shared()
            let client = environment.client
            let limits = environment.server.service.services.changeWaiter.gate.limits
            let app = try environment.makeApp(prefix: "hog")
            let cursors = try (0..<1000).map { try HeavyTests.startCursor(app, "f\($0 % 100)", client: client) }
            var fds: [Int32] = []
            // 15 s: every one of the 2,000 arrives before the first is due, on a slower database too
            // (on Citus opening them all took longer than 5 s, and early ones freed their slots)
            for index in 0..<1000 {
                fds.append(try client.open("POST", "/v1/jobs/claim", token: app.workerKey, json: #"{"waitSeconds": 15}"#))
                fds.append(try client.open("GET", "/v1/users/f\(index % 100)/changes?waitSeconds=15&cursor=\(cursors[index])",
                                           token: app.serverKey))
            }
            // While the crowd waits, short requests of this app and of another are answered.
            let other = try environment.makeApp(prefix: "calm")
            for index in 0..<20 {
                #expect(try client.get("/healthz").status == 200)
                try other.ingest([Events.message("calm\(index)", id: "calm\(index)", sender: "a", group: nil, peer: "b",
                                                 at: nowMilliseconds())], client: client)
            }
            let answers = client.collect(fds, seconds: 30)
            let statuses = answers.map { $0?.status ?? 0 }
            #expect(!statuses.contains(0), "every long poll got an answer: \(statuses.filter { $0 == 0 }.count) closed without one")
            let refused = answers.compactMap { $0 }.filter { $0.status == 429 }
            #expect(refused.allSatisfy { $0.errorCode == "ERR_OVERLOADED" && $0.headers["retry-after"] != nil })
            // at most the app's share waited: 100 users × at most perUser feeds, and the claims
            let waited = statuses.filter { $0 == 200 }.count
            #expect(waited <= limits.perApp, "\(waited) waited, the app's share is \(limits.perApp)")
            #expect(refused.count == 2000 - waited && refused.count >= 2000 - limits.perApp)
            print("long polls: of 2,000 in one app, \(waited) waited and \(refused.count) were refused with 429")
        }
    }
}
