import Foundation
import Glibc
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Testing

/// A background service that ends when no shutdown was asked is noticed (`ServiceGroup`): the
/// others are stopped and `herald serve` exits non-zero, saying which service ended and why.
/// `HERALD_TEST_END_SERVICE` makes a service's `run()` throw a second after it starts.
@Suite("Services that end", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ServiceEndTests {
    @Test("herald serve whose service ends unexpectedly: an error line naming it and why, the others stopped, exit status 1",
          arguments: ["maintenance", "http"])
    func serveExitsNonZero(_ name: String) throws {
        let environment = try TestEnvironment.shared()
        let databaseURL = try #require(environment.server.service.services.configuration.databaseURL)
        let started = Date()
        let server = try ServerProcess(databaseURL: databaseURL, environment: ["HERALD_TEST_END_SERVICE": name])
        let line = try #require(server.output.firstLine(containing: "service ended unexpectedly", seconds: 10),
                                "no unexpected end was logged: \(server.output.all.suffix(5))")
        let logged = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(logged["level"] as? String == "error")
        #expect(logged["service"] as? String == name)
        #expect(logged["error"] as? String == "HERALD_TEST_END_SERVICE ended it")
        let exited = eventually(seconds: 10) { !server.process.isRunning }
        #expect(exited, "herald serve is still running after \(name) ended")
        if !exited { server.signal(SIGKILL) }   // a failure, not a hang
        #expect(server.output.firstLine(containing: "\"msg\":\"stopped\"", seconds: 1) != nil, "the others were stopped")
        let status = server.wait()
        #expect(status == 1, "exit status \(status)")
        #expect(Date().timeIntervalSince(started) < 15)
    }

    @Test("in process, an unexpected end stops the server and is logged, and the process goes on")
    func inProcessOnlyLogs() throws {
        let environment = try TestEnvironment.shared()
        // a database of its own: its delivery, while it runs, must not take other suites' jobs
        try environment.withDatabaseOfItsOwn(prefix: "ended") { databaseURL in
            let lines = LogRecorder()
            let configuration = try TestEnvironment.configuration(databaseURL: databaseURL, overrides: ["HERALD_TEST_END_SERVICE": "fanout"])
            let server = try HeraldServer(configuration: configuration, logger: Logger(level: .info) { lines.append($0) })
            try server.start()
            defer { server.shutdown() }
            #expect(eventually(seconds: 10) { server.unexpectedEnd != nil })
            #expect(server.unexpectedEnd == ServiceGroup.End(service: "fanout", reason: "HERALD_TEST_END_SERVICE ended it"))
            #expect(lines.all.contains { $0.contains("service ended unexpectedly") && $0.contains(#""service":"fanout""#) })
            #expect(eventually(seconds: 10) { lines.all.contains { $0.contains(#""msg":"stopped""#) } })
            #expect((try? HTTPClient(port: server.port).get("/healthz")) == nil, "the listener was stopped too")
        }
    }

    @Test("HERALD_TEST_END_SERVICE naming no service is a configuration error")
    func unknownServiceName() throws {
        #expect(throws: ConfigurationError.self) {
            _ = try HeraldServer(configuration: try TestEnvironment.configuration(overrides: ["HERALD_TEST_END_SERVICE": "nothing"]),
                                 logger: Logger(level: .error) { _ in })
        }
    }
}
