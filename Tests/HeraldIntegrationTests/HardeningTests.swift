import Foundation
import Glibc
@testable import HeraldTestSupport
import Testing

/// Issue 12: what a hostile client tried, each a regression test of its defect.
@Suite("Hardening", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct HardeningTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// Opens a connection that sends part of a request head and nothing more.
    static func slowConnection(port: Int) throws -> Int32 {
        let fd = try HTTPClient(port: port).connect(timeoutSeconds: 1)
        let head = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n".utf8)
        _ = head.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        return fd
    }

    /// Whether the server closed `fd` within `seconds`, while the client sends a byte every 200 ms.
    static func closedWhileDribbling(_ fd: Int32, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            var byte: UInt8 = UInt8(ascii: "X")
            _ = send(fd, &byte, 1, Int32(MSG_NOSIGNAL))
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&poller, 1, 200) > 0 {
                var buffer = [UInt8](repeating: 0, count: 1024)
                let count = recv(fd, &buffer, buffer.count, 0)
                if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
            }
        }
        return false
    }

    @Test("more slow connections than the limit: a new request is answered, the slow ones are closed at the header deadline")
    func slowClients() throws {
        var configuration = try TestEnvironment.configuration(databaseURL: environment.server.service.services.configuration.databaseURL)
        configuration.maxConnections = 40
        configuration.headerTimeoutSeconds = 2
        configuration.idleTimeoutSeconds = 60
        let server = try HeraldTestServer.start(configuration)
        defer { server.shutdown() }
        var slow: [Int32] = []
        defer { for fd in slow { close(fd) } }
        for _ in 0..<100 { slow.append(try Self.slowConnection(port: server.port)) }

        // A fresh connection is served although 100 connections hold partial heads (limit 40).
        let fresh = try HTTPClient(port: server.port).raw(Array("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8),
                                                         seconds: 5)
        #expect(fresh.responses.first?.status == 200, "answered while the slow connections are open")
        // evicted sockets are shut down at once; libmicrohttpd reports them closed on its next pass
        // (well before the 2 s header deadline would close them anyway)
        #expect(eventually(seconds: 0.5) { server.http.openConnections <= 41 }, "the table keeps to its limit: \(server.http.openConnections)")

        // The newest slow connection is closed at the 2 s header deadline however it dribbles.
        #expect(Self.closedWhileDribbling(slow.last!, seconds: 6), "a dribbling connection is closed at the deadline")
        #expect(eventually(seconds: 5) { server.http.openConnections == 0 }, "every slow connection was closed")
    }

    @Test("conflicting body framing is a 400 that closes the connection: nothing after it runs as a request")
    func smuggling() throws {
        let app = try environment.makeApp(prefix: "smuggle")
        let smuggled = "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(app.ingestKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 38\r\n\r\n"
            + "[]GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n"
        let result = try client.raw(Array(smuggled.utf8), seconds: 5)
        #expect(result.responses.count == 1, "one answer, not two: \(result.responses.map(\.status))")
        #expect(result.responses.first?.status == 400)
        #expect(result.responses.first?.errorCode == "ERR_BAD_REQUEST")
        #expect(result.responses.first?.errorParams["field"] as? String == "Content-Length")
        #expect(result.closed)

        let both = "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(app.ingestKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "2\r\n[]\r\n0\r\n\r\nGET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n"
        let second = try client.raw(Array(both.utf8), seconds: 5)
        #expect(second.responses.map(\.status) == [400])
        #expect(second.closed)

        // A coding other than chunked, or chunked twice, has no length to rely on.
        for coding in ["gzip", "chunked\r\nTransfer-Encoding: chunked", "chun ked"] {
            let odd = "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(app.ingestKey)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: \(coding)\r\n\r\n2\r\n[]\r\n0\r\n\r\n"
            let result = try client.raw(Array(odd.utf8), seconds: 5)
            #expect(result.responses.map(\.status) == [400], "\(coding)")
            #expect(result.responses.first?.errorParams["field"] as? String == "Transfer-Encoding")
        }

        // The same value twice is one length, as RFC 9112 allows.
        let same = "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(app.ingestKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]"
        #expect(try client.raw(Array(same.utf8), seconds: 5).responses.first?.status == 200)
    }

    @Test("a declared body above the limit is a 413 at once, not a wait for bytes that never come")
    func oversizedDeclaredBody() throws {
        let app = try environment.makeApp(prefix: "huge")
        let head = "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(app.ingestKey)\r\n"
            + "Content-Type: application/json\r\nContent-Length: 9223372036854775807\r\n\r\n["
        let result = try client.raw(Array(head.utf8), seconds: 5)
        #expect(result.responses.first?.status == 413)
        #expect(result.responses.first?.errorCode == "ERR_PAYLOAD_TOO_LARGE")
        #expect(result.closed)
        // SPEC §3's order holds: without a valid key it is a 401, also at once.
        let anonymous = "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Content-Length: 9223372036854775807\r\n\r\n["
        let refused = try client.raw(Array(anonymous.utf8), seconds: 5)
        #expect(refused.responses.first?.status == 401)
        #expect(refused.closed)
    }

    @Test("a chunked body whose chunk sizes pass the limit is a 413 at once, not a wait for chunks that never come")
    func oversizedChunks() throws {
        let app = try environment.makeApp(prefix: "hugechunk")
        func head(_ key: String) -> String {
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(key)\r\n"
                + "Content-Type: application/cloudevents-batch+json\r\nTransfer-Encoding: chunked\r\n\r\n"
        }
        // One size far above the limit, then silence (the idle deadline is 60 s: the 3 s read
        // timeout would end the wait first).
        let huge = try client.raw(Array((head(app.ingestKey) + "ffffffffffffffff\r\n[").utf8), seconds: 3)
        #expect(huge.responses.first?.status == 413)
        #expect(huge.responses.first?.errorCode == "ERR_PAYLOAD_TOO_LARGE")
        #expect(huge.responses.first?.headers["content-type"] == "application/json")
        #expect(huge.closed, "the connection is closed at once")

        // Sizes each within the limit that add up past it, on a server with a 1,024-byte limit.
        var configuration = try TestEnvironment.configuration(databaseURL: environment.server.service.services.configuration.databaseURL)
        configuration.maxBodyBytes = 1024
        let small = try HeraldTestServer.start(configuration)
        defer { small.shutdown() }
        let sum = head(app.ingestKey) + "200\r\n" + String(repeating: " ", count: 512) + "\r\n201\r\n"
        let summed = try HTTPClient(port: small.port).raw(Array(sum.utf8), seconds: 3)
        #expect(summed.responses.map(\.status) == [413])
        #expect(summed.closed)

        // A chunked batch within the limit is applied, with an extension, a bare LF, a chunk that
        // looks like a size and a trailer, and the next request on the connection is answered.
        let batch = Events.json([Events.message("e1", id: "m1", sender: "alice", at: nowMilliseconds() - 60_000,
                                                text: "ffffffffffffffff")])
        let bytes = Array(batch.utf8)
        let split = bytes.count / 2
        let chunks = String(split, radix: 16) + ";ext=1\r\n" + String(decoding: bytes[..<split], as: UTF8.self) + "\n"
            + String(bytes.count - split, radix: 16) + "\r\n" + String(decoding: bytes[split...], as: UTF8.self) + "\r\n"
            + "0\r\nX-Trailer: ffffffffffffffff\r\n\r\n"
        let next = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let served = try client.raw(Array((head(app.ingestKey) + chunks + next).utf8), seconds: 5)
        #expect(served.responses.map(\.status) == [200, 200], "\(served.responses.map(\.text))")
        let results = served.responses.first?.json["results"] as? [[String: Any]] ?? []
        #expect(results.map { $0["status"] as? String } == ["accepted"])
        let stored = try environment.connection().query("SELECT count(*) FROM messages WHERE app = \(app.id)")
        #expect(try stored[0].decode(0, as: Int.self) == 1)
    }

    @Test("what libmicrohttpd refuses itself is answered in SPEC §3's JSON, not its HTML pages")
    func libraryErrorsInJSON() throws {
        let big = String(repeating: "a", count: 100_000)
        let cases: [(name: String, request: String, status: Int, code: String)] = [
            ("a header block beyond the memory limit", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n",
             431, "ERR_HEADERS_TOO_LARGE"),
            ("a URI beyond the memory limit", "GET /\(big) HTTP/1.1\r\nHost: x\r\n\r\n", 414, "ERR_URI_TOO_LONG"),
            ("malformed chunking", "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "ERR_BAD_REQUEST"),
            ("a chunk size beyond 64 bits", "POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "Transfer-Encoding: chunked\r\n\r\n1ffffffffffffffffff\r\n", 413, "ERR_PAYLOAD_TOO_LARGE"),
            ("an HTTP version it does not speak", "GET /healthz HTTP/2.5\r\nHost: x\r\n\r\n", 505, "ERR_BAD_REQUEST"),
        ]
        for item in cases {
            let result = try client.raw(Array(item.request.utf8), seconds: 5)
            let response = result.responses.first
            #expect(response?.status == item.status, "\(item.name): \(response?.status ?? -1) \(response?.text ?? "")")
            #expect(response?.headers["content-type"] == "application/json", "\(item.name)")
            #expect(response?.errorCode == item.code, "\(item.name): \(response?.text ?? "")")
            #expect(response?.text.hasSuffix("\n") == true, "\(item.name)")
            #expect(result.closed, "\(item.name): the connection is closed after the error")
        }
    }

    @Test("an event with more than 1,000 mentions is rejected naming data.mentions; the rest of its batch is applied")
    func mentionCap() throws {
        let app = try environment.makeApp(prefix: "mentions")
        let past = nowMilliseconds() - 60_000
        let many = (0..<1001).map { "u\($0)" }
        let response = try app.post([Events.message("e1", id: "m1", sender: "alice", at: past, mentions: many),
                                     Events.message("e2", id: "m2", sender: "alice", at: past, mentions: Array(many.prefix(1000)))],
                                    client: client)
        #expect(response.status == 200)
        let results = response.json["results"] as? [[String: Any]] ?? []
        #expect(results.map { $0["status"] as? String } == ["rejected", "accepted"])
        let error = results.first?["error"] as? [String: Any]
        #expect((error?["params"] as? [String: Any])?["field"] as? String == "data.mentions")
        let stored = try environment.connection().query("SELECT count(*) FROM mentions WHERE app = \(app.id)")
        #expect(try stored[0].decode(0, as: Int.self) == 1000)
    }

    @Test("a JSON integer id beyond 64 bits is its decimal text (SPEC §1)")
    func largeIntegerIDs() throws {
        let app = try environment.makeApp(prefix: "bigid")
        let past = nowMilliseconds() - 60_000
        let body = #"[{"specversion":"1.0","id":"e1","source":"chat","type":"message.created","#
            + #""data":{"id":18446744073709551615,"sender":"alice","receiverType":"group","receiver":"g1","sentAt":\#(past),"#
            + #""mentions":[184467440737095516160]}}]"#
        let response = try client.post("/v1/events", token: app.ingestKey, json: body,
                                       headers: ["Content-Type": "application/cloudevents-batch+json"])
        #expect(response.json["accepted"] as? Int == 1, "\(response.text)")
        let rows = try environment.connection().query(
            "SELECT m.id, mn.uid FROM messages m JOIN mentions mn ON mn.app = m.app AND mn.message_id = m.id WHERE m.app = \(app.id)")
        #expect(rows.count == 1)
        #expect(try rows.first?.decode(0, as: String.self) == "18446744073709551615")
        #expect(try rows.first?.decode(1, as: String.self) == "184467440737095516160")
        // The same on the routes that take ids in a body.
        let members = try client.send("PUT", "/v1/groups/g1/members", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"members": [18446744073709551615]}"#.utf8))
        #expect(members.status == 200, "\(members.text)")
        let stored = try environment.connection().query("SELECT uid FROM group_members WHERE app = \(app.id) AND joined_at > coalesce(removed_at, -1)")
        #expect(try stored.map { try $0.decode(0, as: String.self) } == ["18446744073709551615"])
    }

    @Test("a path id that is not valid UTF-8 once decoded is a 400 naming the parameter, not U+FFFD")
    func invalidUTF8PathIDs() throws {
        let app = try environment.makeApp(prefix: "utf8")
        for path in ["/v1/users/%FF/threads", "/v1/users/%C0/threads", "/v1/users/a%E2%82/threads"] {
            let response = try client.get(path, token: app.serverKey)
            #expect(response.status == 400, "\(path): \(response.text)")
            #expect(response.errorCode == "ERR_BAD_REQUEST")
            #expect(response.errorParams["field"] as? String == "uid")
        }
        #expect(try client.get("/v1/users/%C3%A9/threads", token: app.serverKey).status == 200, "valid UTF-8 is an id")
    }

    @Test("the local cluster's socket is reachable by its owner only, not by every local user")
    func privateSocket() throws {
        guard getuid() == 0 else { return }   // the check needs another user to try as
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let owner = try runCommand(["psql", cluster.url, "-tAc", "SELECT 1"])
        #expect(owner.status == 0 && owner.output.contains("1"), "the owner connects: \(owner.output)")
        let other = try runCommand(["runuser", "-u", "nobody", "--", "psql", cluster.url, "-tAc", "SELECT 1"])
        #expect(other.status != 0, "another local user is refused: \(other.output)")
    }

    @Test("a second make run in the same folder refuses to start and leaves the first one alone")
    func secondRun() throws {
        let state = NSTemporaryDirectory() + "herald-run-" + UUID().uuidString.prefix(8).lowercased()
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: state) }
        // The first run holds the folder's lock (as scripts/run.sh does while Herald serves).
        try "4242\n".write(toFile: state + "/run.pid", atomically: true, encoding: .utf8)
        let holder = try Subprocess(["flock", state + "/run.lock", "sleep", "30"], environment: ProcessInfo.processInfo.environment)
        defer { kill(holder.pid, SIGKILL); _ = holder.wait() }
        #expect(eventually(seconds: 5) { (try? runCommand(["flock", "-n", state + "/run.lock", "true"]).status) == 1 })
        var environment = ProcessInfo.processInfo.environment
        environment["HERALD_STATE_DIR"] = state
        let second = try runCommand(["bash", repositoryRoot + "/scripts/run.sh"], environment: environment)
        #expect(second.status == 1)
        #expect(second.output.contains("already running") && second.output.contains("4242"), "\(second.output)")
        #expect(!FileManager.default.fileExists(atPath: state + "/pg"), "nothing was set up or stopped")
    }

    @Test("one event nesting deeper than 128 levels is rejected alone; the rest of its batch is applied")
    func deepEvent() throws {
        let app = try environment.makeApp(prefix: "deep")
        let past = nowMilliseconds() - 60_000
        let good = Events.json([Events.message("e1", id: "m1", sender: "alice", at: past)])
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        let bad = #"{"specversion":"1.0","id":"e2","source":"chat","type":"message.created","data":{"x":\#(deep)}}"#
        let body = String(good.dropLast()) + "," + bad + "]"
        let response = try client.post("/v1/events", token: app.ingestKey, json: body,
                                       headers: ["Content-Type": "application/cloudevents-batch+json"])
        #expect(response.status == 200, "\(response.text)")
        let results = response.json["results"] as? [[String: Any]] ?? []
        #expect(results.map { $0["status"] as? String } == ["accepted", "rejected"])
        #expect(((results.last?["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String == "data")
    }

    @Test("one JSON reader for every route: a key given twice is a 400 naming it, invalid UTF-8 a 400 that says so")
    func oneJSONRule() throws {
        let app = try environment.makeApp(prefix: "json")
        let twice = try client.post("/v1/users/alice/subscriptions/lookup", token: app.serverKey,
                                    json: #"{"messageIds":["a"],"messageIds":"x"}"#)
        #expect(twice.status == 400)
        #expect(twice.errorCode == "ERR_BAD_REQUEST")
        #expect(twice.errorParams["field"] as? String == "messageIds")
        let claim = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max":1,"max":2}"#)
        #expect(claim.status == 400 && claim.errorParams["field"] as? String == "max")
        let ingest = try client.post("/v1/events", token: app.ingestKey, json: #"[{"id":"e1","id":"e2"}]"#,
                                     headers: ["Content-Type": "application/cloudevents-batch+json"])
        #expect(ingest.status == 400 && ingest.errorParams["field"] as? String == "id")
        let invalid = try client.send("POST", "/v1/users/alice/subscriptions/lookup", token: app.serverKey,
                                      headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"messageIds":[""#.utf8) + [0xFF] + Array(#""]}"#.utf8))
        #expect(invalid.status == 400)
        let message = (invalid.json["error"] as? [String: Any])?["message"] as? String ?? ""
        #expect(message.contains("UTF-8"), "\(invalid.text)")
    }
}
