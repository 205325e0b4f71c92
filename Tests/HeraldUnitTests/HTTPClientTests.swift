import Foundation
import HTTPClient
import HTTPServer
import Synchronization
import Testing

/// The libcurl wrapper against a real local server (libmicrohttpd on loopback; no database).
@Suite("HTTPClient")
struct HTTPClientTests {
    @Test("status, body, Retry-After and the sent headers and body; at most `concurrency` at a time")
    func answers() throws {
        let seen = ReceivedRequests()
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 4)) { request in
            seen.add(request)
            usleep(20_000)
            switch request.path {
            case "/busy": return Response(status: 429, headers: [("Retry-After", "7")])
            case "/body": return Response(status: 200, body: Array(#"{"ok":true}"#.utf8))
            default: return Response(status: 204)
            }
        }
        try server.start()
        defer { server.shutdown(drainTimeoutSeconds: 1) }
        let base = "http://127.0.0.1:\(server.port)"
        let client = HTTPClient(userAgent: "test", allowInternalAddresses: true)
        var concurrent = 0, peak = 0
        let requests = [OutboundRequest(url: base + "/busy", headers: ["X-One: 1"], body: Array("hello".utf8), timeoutMs: 2000),
                        OutboundRequest(url: base + "/body", headers: [], body: [], timeoutMs: 2000)]
            + (0..<6).map { _ in OutboundRequest(url: base + "/none", headers: [], body: [], timeoutMs: 2000) }
        let responses = client.perform(requests, concurrency: 2, progress: { event in
            switch event {
            case .started: concurrent += 1; peak = max(peak, concurrent)
            case .finished: concurrent -= 1
            }
        })
        #expect(responses[0].status == 429 && responses[0].retryAfter == "7" && responses[0].failure == nil)
        #expect(responses[1].status == 200 && String(decoding: responses[1].body, as: UTF8.self) == #"{"ok":true}"#)
        #expect(responses[2...].allSatisfy { $0.status == 204 })
        #expect(peak == 2, "at most two at a time")
        let first = try #require(seen.all.first { $0.path == "/busy" })
        #expect(first.headers["x-one"] == "1" && first.body == Array("hello".utf8) && first.headers["content-type"] == "application/json")
        #expect(first.headers["expect"] == nil && first.headers["user-agent"] == "test")
    }

    @Test("a timeout, a refused connection, a bad URL and requests not started are failures, not statuses")
    func failures() throws {
        let server = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 2)) { _ in
            usleep(600_000)
            return Response(status: 200)
        }
        try server.start()
        let slow = "http://127.0.0.1:\(server.port)/slow"
        let closed = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 1)) { _ in Response(status: 200) }
        try closed.start()
        let refused = "http://127.0.0.1:\(closed.port)/"
        closed.shutdown(drainTimeoutSeconds: 1)
        defer { server.shutdown(drainTimeoutSeconds: 1) }
        let client = HTTPClient(userAgent: "test", allowInternalAddresses: true)
        let responses = client.perform([OutboundRequest(url: slow, headers: [], body: [], timeoutMs: 100),
                                        OutboundRequest(url: refused, headers: [], body: [], timeoutMs: 1000),
                                        OutboundRequest(url: "file:///etc/passwd", headers: [], body: [], timeoutMs: 1000)],
                                       concurrency: 8)
        #expect(responses[0].failure == .timeout && responses[0].status == 0)
        if case .connect? = responses[1].failure {} else { Issue.record("refused: \(String(describing: responses[1].failure))") }
        if case .other? = responses[2].failure {} else { Issue.record("file: \(String(describing: responses[2].failure))") }
        let unsent = client.perform([OutboundRequest(url: slow, headers: [], body: [], timeoutMs: 100)], concurrency: 1, shouldStart: { false })
        #expect(unsent[0].failure == .notSent)
    }
}

final class ReceivedRequests: Sendable {
    private let requests = Mutex<[Request]>([])
    func add(_ request: Request) { requests.withLock { $0.append(request) } }
    var all: [Request] { requests.withLock { $0 } }
}
