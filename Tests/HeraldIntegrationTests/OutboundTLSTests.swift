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
        let port = try DownPort()   // reserved, then handed to s_server
        port.release()
        let server = try Subprocess(["openssl", "s_server", "-accept", "127.0.0.1:\(port.port)", "-cert", directory + "/cert.pem",
                                     "-key", directory + "/key.pem", "-www", "-quiet"])
        defer {
            kill(server.pid, SIGKILL)   // s_server does not stop on SIGTERM
            _ = server.wait()
        }
        let client = HTTPClient(userAgent: "test")
        let request = OutboundRequest(url: "https://127.0.0.1:\(port.port)/hook", headers: [], body: Array("{}".utf8), timeoutMs: 2000)
        var response = client.perform([request], limit: { _ in 1 })[0]
        for _ in 0..<50 {
            guard case .connect? = response.failure else { break }
            usleep(100_000)   // s_server is still starting
            response = client.perform([request], limit: { _ in 1 })[0]
        }
        guard case .other(let message)? = response.failure else {
            Issue.record("expected a TLS failure, got status \(response.status), \(String(describing: response.failure))")
            return
        }
        #expect(response.status == 0 && message.lowercased().contains("certificate"), "\(message)")
    }
}
