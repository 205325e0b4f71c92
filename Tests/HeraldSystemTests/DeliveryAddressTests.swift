import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import Secrets
@testable import HeraldTestSupport
import Testing

/// SPEC §13.3's last rule, against a server that does not allow private delivery addresses (the
/// other suites' servers set HERALD_DELIVERY_ALLOW_PRIVATE=1 for their local receivers), on a
/// cluster of its own so that its delivery loop sees no other suite's apps.
@Suite("Delivery addresses (SSRF)", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DeliveryAddressTests {
    @Test("a delivery URL whose host is internal is 400 delivery.url and saves nothing; one that is internal at delivery time is dead, unsent")
    func internalAddresses() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: cluster.url,
                                                                                 overrides: ["HERALD_DELIVERY_ALLOW_PRIVATE": nil]))
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        let admin = TestEnvironment.adminToken
        #expect(try client.post("/v1/apps", token: admin, json: #"{"id":"ssrf"}"#).status == 201)
        var keys: [String: String] = [:]
        for role in ["ingest", "worker", "server"] {
            keys[role] = try client.post("/v1/apps/ssrf/keys", token: admin, json: #"{"role":"\#(role)"}"#).json["key"] as? String
        }
        let app = TestApp(id: "ssrf", keys: keys, keyIDs: [:])
        func patch(_ delivery: [String: Any]) throws -> HTTPResult {
            try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                            body: Array(Events.json(["delivery": delivery]).utf8))
        }

        let internalURLs = ["http://127.0.0.1/hook", "http://127.1.2.3:8080/x", "http://localhost:8080/hook", "http://LocalHost./hook",
                        "http://api.localhost/hook", "http://[::1]/hook", "http://0.0.0.0/hook", "http://0/hook", "http://2130706433/hook",
                        "http://0x7f.1/hook", "http://0x7f000001/hook", "http://0177.0.0.1/hook", "http://127.1/hook",
                        "http://10.1.2.3/hook", "http://172.16.0.1/hook", "http://172.31.255.254/hook", "http://192.168.1.10/hook",
                        "http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/hook", "http://100.127.255.254/hook",
                        "http://[fc00::1]/hook", "http://[fd12:3456::1]/hook", "http://[fe80::1]/hook", "http://[::]/hook",
                        "http://[::ffff:127.0.0.1]/hook", "http://[::ffff:7f00:1]/hook", "http://[::ffff:10.0.0.1]/hook",
                        "https://user:secret@127.0.0.1/hook", "http://public.example@127.0.0.1/hook", "https://192.168.0.1:8443/api/push"]
        for url in internalURLs {
            for mode in ["webhook", "gorush"] {
                let refused = try patch(["mode": mode, "url": url])
                #expect(refused.status == 400 && refused.errorCode == "ERR_BAD_REQUEST" && refused.errorParams["field"] as? String == "delivery.url",
                        "\(mode) \(url): \(refused.status) \(refused.text)")
            }
        }
        // SPEC §13.4: the same rule for direct delivery's provider endpoints and token URI
        let key = try #require(PrivateKey.ec(curve: "P-256")).pkcs8PEM, rsa = try #require(PrivateKey.rsa(bits: 2048)).pkcs8PEM
        for (delivery, field) in [
            (["apns": ["teamId": "T", "keyId": "K", "privateKey": key, "endpoint": "https://10.0.0.8"]], "delivery.apns.endpoint"),
            (["apns": ["teamId": "T", "keyId": "K", "privateKey": key, "sandboxEndpoint": "https://localhost:8443"]],
             "delivery.apns.sandboxEndpoint"),
            (["fcm": ["projectId": "p", "endpoint": "https://[::1]:9000", "serviceAccount": ["client_email": "a@b", "private_key": rsa]]],
             "delivery.fcm.endpoint"),
            (["fcm": ["projectId": "p", "serviceAccount": ["client_email": "a@b", "private_key": rsa,
                                                           "token_uri": "https://169.254.169.254/token"]]],
             "delivery.fcm.serviceAccount.token_uri"),
        ] as [([String: Any], String)] {
            var body = delivery
            body["mode"] = "direct"
            let refused = try patch(body)
            #expect(refused.status == 400 && refused.errorCode == "ERR_BAD_REQUEST" && refused.errorParams["field"] as? String == field,
                    "\(field): \(refused.status) \(refused.text)")
        }
        let unchanged = try client.get("/v1/settings/notifications", token: app.serverKey).json["delivery"] as? [String: Any]
        #expect(unchanged?["mode"] as? String == "pull" && unchanged?["url"] is NSNull, "a refused PATCH saves nothing")
        // Public addresses next to the internal ranges are accepted (literals: no DNS in the test).
        for url in ["http://93.184.216.34/hook", "http://172.32.0.1/hook", "http://100.128.0.1/hook", "http://[2001:db8::1]/hook",
                    "http://11.0.0.1/hook"] {
            #expect(try patch(["mode": "pull", "url": url]).status == 200, "\(url)")
        }

        // At delivery time the host resolves to an internal address (DNS rebinding): the stored URL
        // is changed under Herald's feet, as a name's answer would be.
        let receiver = try Receiver { _, _ in Response(status: 200, body: Array(#"{"internal":"secret answer"}"#.utf8)) }
        defer { receiver.stop() }
        let connection = try PostgresConnection(connectionString: cluster.url)
        try connection.query("""
            UPDATE app_settings SET settings = jsonb_set(jsonb_set(settings, '{delivery,url}', to_jsonb(\(receiver.url)::text)),
                                                          '{delivery,mode}', '"webhook"')
             WHERE app = \(app.id)
            """)
        let past = nowMilliseconds() - 3_600_000
        try app.ingest(["alice", "bob"].map { Events.member("join-\($0)", "member.joined", uid: $0, at: past - 1000) }, client: client)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "hello")], client: client)
        func jobs() throws -> [(state: String, error: String?)] {
            try connection.query("SELECT state, last_error FROM jobs WHERE app = \(app.id)").map { (try $0.decode(0), try $0.decode(1)) }
        }
        let dead = try eventually(seconds: 20) { let rows = try jobs(); return !rows.isEmpty && rows.allSatisfy { $0.state == "dead" } }
        let rows = try jobs()
        #expect(dead, "\(rows)")
        #expect(receiver.deliveries.isEmpty, "nothing reaches the internal address")
        for job in rows {
            #expect(job.state == "dead")
            #expect(!(job.error ?? "").contains("secret answer") && !(job.error ?? "").contains("127.0.0.1"), "\(job.error ?? "")")
        }
    }
}
