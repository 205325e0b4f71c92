import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Testing

@Suite("Readiness and database outages", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ReadinessTests {
    @Test("/readyz goes 503 while the database is stopped and back to 200 when it returns, without a restart")
    func outageAndRecovery() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        let admin = TestEnvironment.adminToken

        let ready = try client.get("/readyz")
        #expect(ready.status == 200)
        #expect(ready.json["schemaVersion"] as? Int == server.service.services.migrator.latestVersion)
        #expect(try client.post("/v1/apps", token: admin, json: #"{"id":"outage"}"#).status == 201)
        let key = try client.post("/v1/apps/outage/keys", token: admin, json: #"{"role":"server"}"#).json["key"] as? String
        let serverKey = try #require(key)
        // Use every pooled connection once, so that the stop breaks idle connections too.
        for _ in 0..<20 { #expect(try client.get("/v1/whoami", token: serverKey).status == 200) }

        try cluster.stop()
        let down = try client.get("/readyz")
        #expect(down.status == 503)
        #expect(down.errorCode == "ERR_UNAVAILABLE")
        #expect(down.headers["retry-after"] != nil)
        #expect(try client.get("/healthz").status == 200, "the process itself is alive")
        // Routes that need the database answer 503 with Retry-After too, never 500.
        for _ in 0..<5 {
            let route = try client.get("/v1/whoami", token: serverKey)
            #expect(route.status == 503)
            #expect(route.errorCode == "ERR_UNAVAILABLE")
            #expect(route.headers["retry-after"] != nil)
            let admin = try client.get("/v1/apps", token: admin)
            #expect(admin.status == 503)
        }

        try cluster.start()
        let recovered = try eventually(seconds: 20) { try client.get("/readyz").status == 200 }
        #expect(recovered)
        for _ in 0..<20 {
            #expect(try client.get("/v1/whoami", token: serverKey).status == 200)
        }
    }

    @Test("after a PostgreSQL restart, once /readyz is 200, concurrent inbox and feed GETs all answer 200 (no dead pooled connection is used)")
    func restartLeavesNoDeadConnections() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        let admin = TestEnvironment.adminToken
        #expect(try client.post("/v1/apps", token: admin, json: #"{"id":"restart"}"#).status == 201)
        let key = try client.post("/v1/apps/restart/keys", token: admin, json: #"{"role":"server"}"#).json["key"] as? String
        let serverKey = try #require(key)
        let paths = (0..<32).flatMap { ["/v1/users/u\($0)/threads", "/v1/users/u\($0)/changes"] }
        /// Every path at once, each on a thread of its own; the statuses in the paths' order.
        func concurrently() -> [Int] {
            let results = paths.map { path in
                Thread.detachNewThreadResult { (try? client.get(path, token: serverKey).status) ?? -1 }
            }
            return results.map { $0.wait(seconds: 60) ?? -2 }
        }
        // Every pooled connection is opened before the restart, so that the restart leaves them all dead.
        #expect(concurrently().allSatisfy { $0 == 200 })

        try cluster.stop()
        try cluster.start()
        #expect(try eventually(seconds: 30) { try client.get("/readyz").status == 200 })
        let statuses = concurrently()
        #expect(statuses.allSatisfy { $0 == 200 },
                "statuses after the restart: \(Dictionary(statuses.map { ($0, 1) }, uniquingKeysWith: +))")
    }

    @Test("/readyz is 503 when the schema is behind the binary")
    func schemaBehind() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        #expect(try client.get("/readyz").status == 200)
        let connection = try server.database.withConnection { connection in
            try connection.query("DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations)")
        }
        #expect(connection.affectedRows == 1)
        let behind = try client.get("/readyz")
        #expect(behind.status == 503)
        #expect(behind.errorParams["check"] as? String == "schema")
    }
}
