import Foundation
import Glibc
import HTTPClient
import HTTPServer
@testable import HeraldTestSupport
import Testing

/// Built-in delivery's client verifies TLS peers: a server whose certificate no CA signed is a
/// failure, never an answer. (No database needed; here for the child processes of the support.)
@Suite("Outbound TLS")
struct OutboundTLSTests {
    @Test("an https receiver with a self-signed certificate is refused: verification is on")
    func selfSignedIsRefused() throws {
        let directory = NSTemporaryDirectory() + "herald-tls-" + UUID().uuidString.prefix(8).lowercased()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let made = try runCommand(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-days", "1",
                                   "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem"])
        try #require(made.status == 0, "openssl req: \(made.output)")
        // A free port for s_server: reserved, then freed just before it binds; if something took
        // it meanwhile, s_server exits at once and another port is tried.
        var server: Subprocess?
        var port = 0
        for _ in 0..<5 where server == nil {
            let reserved = try DownPort()
            port = reserved.port
            reserved.stop()
            let started = try Subprocess(["openssl", "s_server", "-accept", "127.0.0.1:\(port)", "-cert", directory + "/cert.pem",
                                          "-key", directory + "/key.pem", "-www", "-quiet"])
            usleep(300_000)
            var status: Int32 = 0
            if waitpid(started.pid, &status, WNOHANG) == 0 { server = started }
        }
        let running = try #require(server, "s_server did not start")
        defer {
            kill(running.pid, SIGKILL)   // s_server does not stop on SIGTERM
            _ = running.wait()
        }
        let client = HTTPClient(userAgent: "test", allowInternalAddresses: true)
        let request = OutboundRequest(url: "https://127.0.0.1:\(port)/hook", headers: [], body: Array("{}".utf8), timeoutMs: 2000)
        var response = client.perform([request], concurrency: 1)[0]
        for _ in 0..<50 {
            guard case .connect? = response.failure else { break }
            usleep(100_000)   // s_server is still starting
            response = client.perform([request], concurrency: 1)[0]
        }
        guard case .other(let message)? = response.failure else {
            Issue.record("expected a TLS failure, got status \(response.status), \(String(describing: response.failure))")
            return
        }
        #expect(response.status == 0 && message.lowercased().contains("certificate"), "\(message)")
    }
}
