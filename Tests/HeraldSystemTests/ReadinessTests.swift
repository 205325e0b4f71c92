import Foundation
import HeraldCore
@testable import HeraldTestSupport
import Testing

@Suite("Readiness and database outages", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ReadinessTests {
    @Test("/readyz goes 503 while the database is stopped and back to 200 when it returns, without a restart")
    func outageAndRecovery() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldCoreServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
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

    @Test("/readyz is 503 when the schema is behind the binary")
    func schemaBehind() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldCoreServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
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
