import Foundation
import Postgres
@testable import HeraldTestSupport
import Testing

/// Built-in delivery keeps apps apart (docs/delivery.md, "Apps apart"): a deliverer with nothing
/// to claim sleeps until its app's next job is due instead of claiming every second, and ingest
/// wakes only the deliverer of the app it stored jobs for. Before, every delivering app claimed
/// once a second and every ingest request woke every deliverer: 150 apps with dead receivers
/// made a healthy app's delivery wait. In a database of its own, so that no other suite's
/// delivering apps add to `herald_delivery_claims_total`.
@Suite("Delivery keeps apps apart", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DeliveryIdleTests {
    @Test("an idle deliverer does not claim every second, and another app's ingest does not wake it; its own does")
    func idleAndWoken() throws {
        let environment = try TestEnvironment.shared()
        try environment.withDatabaseOfItsOwn(prefix: "idle") { databaseURL in
            let server = try ServerProcess(databaseURL: databaseURL)
            let client = server.client
            func claims() throws -> Double {
                let text = try client.get("/metrics").text
                return try #require(try PrometheusText.parse(text).value("herald_delivery_claims_total"))
            }

            // a delivering app with nothing to send (its receiver would refuse: nothing listens on port 9)
            let quiet = try environment.makeApp(prefix: "quiet", client: client)
            let patched = try client.send("PATCH", "/v1/settings/notifications", token: quiet.serverKey,
                                          headers: ["Content-Type": "application/json"],
                                          body: Array(Events.json(["delivery": ["mode": "webhook", "url": "https://127.0.0.1:9/hook"]]).utf8))
            #expect(patched.status == 200, "\(patched.text)")
            // and a busy app that pulls its jobs
            let busy = try environment.makeApp(prefix: "busy", client: client)
            #expect(try busy.setMembers("g1", ["alice", "bob"], client: client).status == 200)
            #expect(eventually(seconds: 10) { ((try? claims()) ?? 0) >= 1 }, "the quiet app's deliverer started and claimed")

            let idleStart = try claims()
            Thread.sleep(forTimeInterval: 3.5)
            let idleEnd = try claims()
            #expect(idleEnd - idleStart <= 1, "an idle deliverer claimed \(idleEnd - idleStart) times in 3.5 s")

            let now = nowMilliseconds()
            for n in 0..<10 {
                try busy.ingest([Events.message("b\(n)", id: "bm\(n)", sender: "alice", at: now + Int64(n), text: "hi")], client: client)
            }
            Thread.sleep(forTimeInterval: 0.5)
            let afterBusy = try claims()
            #expect(afterBusy - idleEnd <= 1, "ten requests to another app woke the quiet app's deliverer \(afterBusy - idleEnd) times")

            // its own app's jobs wake it at once
            #expect(try quiet.setMembers("g1", ["alice", "bob"], client: client).status == 200)
            try quiet.ingest([Events.message("q1", id: "qm1", sender: "alice", at: nowMilliseconds(), text: "hi")], client: client)
            #expect(eventually(seconds: 2) { ((try? claims()) ?? 0) > afterBusy }, "the quiet app's own job woke its deliverer")
            let connection = try PostgresConnection(connectionString: databaseURL)
            #expect(eventually(seconds: 5) {
                (try? connection.query("SELECT attempt FROM jobs WHERE app = \(quiet.id)").first?.decode(0, as: Int.self)) == 1
            }, "its job was sent (and failed: nothing listens), within seconds of the ingest")
        }
    }
}
