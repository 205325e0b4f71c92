import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Postgres
@testable import HeraldTestSupport
import Testing

/// Concurrent ingest requests on one thread are applied together (group commit); each request
/// still gets its own results, in its own order, and nothing is lost or doubled.
@Suite("Ingest combining", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct IngestCombinerTests {
    @Test("concurrent single-event requests on one thread: each answered for its own events, every reply's jobs exactly once")
    func concurrentRequests() throws {
        let environment = try TestEnvironment.shared()
        let client = environment.client
        let app = try environment.makeApp(prefix: "combine")
        let base = nowMilliseconds() - 3_600_000
        let members = (0..<10).map { "u\($0)" }
        var setup = members.enumerated().map { Events.member("join-\($0.element)", "member.joined", uid: $0.element, at: base - 1000 + Int64($0.offset)) }
        setup.append(Events.message("c-p", id: "p", sender: "u0", at: base))
        #expect(try app.post(setup, client: client).json["rejected"] as? Int == 0)
        // 8 clients × 10 requests; every request carries its own reply and one other client's
        // (a redelivery racing the original), so concurrent rounds see duplicates across requests.
        let results = (0..<8).map { worker in
            Thread.detachNewThreadResult { () -> [String] in
                let own = HTTPClient(port: environment.server.port)
                var statuses: [String] = []
                for n in 0..<10 {
                    let id = worker * 10 + n
                    let other = ((worker + 1) % 8) * 10 + n
                    let events = [id, other].map {
                        Events.message("c-r\($0)", id: "r\($0)", sender: "u\(1 + $0 % 9)", parent: "p", at: base + 1000 + Int64($0))
                    }
                    guard let response = try? app.post(events, client: own), response.status == 200,
                          let list = response.json["results"] as? [[String: Any]] else { statuses.append("failed"); continue }
                    statuses += zip([id, other], list).map { "\($0.0):\($0.1["id"] as? String ?? "?"):\($0.1["status"] as? String ?? "?")" }
                }
                return statuses
            }
        }
        var accepted: [Int: Int] = [:]
        for result in results {
            let statuses = try #require(result.wait(seconds: 60))
            for status in statuses {
                let parts = status.split(separator: ":")
                #expect(parts.count == 3 && parts[1] == "c-r" + parts[0], "results in the request's own order: \(status)")
                if parts.count == 3, parts[2] == "accepted" { accepted[Int(parts[0])!, default: 0] += 1 }
            }
        }
        #expect(accepted.count == 80 && accepted.values.allSatisfy { $0 == 1 }, "every reply accepted once: \(accepted.count)")
        let connection = try environment.connection()
        let jobs = try connection.query("""
            SELECT count(*), count(DISTINCT (coalesce(j.event_id, m.event_id), j.recipient))
              FROM jobs j JOIN messages m ON m.app = j.app AND m.id = j.message_id
             WHERE j.app = \(app.id) AND coalesce(j.event_id, m.event_id) LIKE 'c-r%'
            """)[0]
        // Default preferences: every member but the sender gets each reply.
        #expect(try jobs.decode(0, as: Int.self) == 80 * 9)
        #expect(try jobs.decode(1, as: Int.self) == 80 * 9)
        let thread = try connection.query("SELECT reply_count FROM threads WHERE app = \(app.id) AND parent_id = 'p'")[0]
        #expect(try thread.decode(0, as: Int.self) == 80)
    }
}
