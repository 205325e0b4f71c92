import Foundation
import Glibc

/// The real `herald serve` binary in a child process, on an ephemeral port.
final class ServerProcess: Sendable {
    /// The binary that `swift build` put beside the tests.
    static var binary: String { repositoryRoot + "/.build/debug/herald" }

    let process: Subprocess
    let output: LineReader
    let port: Int
    var client: HTTPClient { HTTPClient(port: port) }

    init(databaseURL: String, environment extra: [String: String] = [:]) throws {
        guard FileManager.default.isExecutableFile(atPath: Self.binary) else {
            throw TestSetupError(message: "\(Self.binary) is missing: run swift build first (make test does)")
        }
        var environment = [
            "DATABASE_URL": databaseURL, "HERALD_LISTEN": "127.0.0.1:0",
            "HERALD_ADMIN_TOKEN": TestEnvironment.adminToken, "HERALD_THREADS": "4",
            "HERALD_DELIVERY_ALLOW_PRIVATE": "1",   // receivers of the tests are on 127.0.0.1
            "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
        ]
        environment.merge(extra) { $1 }
        process = try Subprocess([Self.binary, "serve"], environment: environment)
        output = LineReader(process.output)
        guard let listening = output.firstLine(containing: "\"msg\":\"listening\"", seconds: 30),
              let object = try? JSONSerialization.jsonObject(with: Data(listening.utf8)) as? [String: Any],
              let port = object["port"] as? Int else {
            kill(process.pid, SIGKILL)
            _ = process.wait()
            throw TestSetupError(message: "herald serve did not start")
        }
        self.port = port
    }

    /// Sends a signal to the server.
    func signal(_ number: Int32) {
        kill(process.pid, number)
    }

    /// Waits for the server to exit; its exit status.
    func wait() -> Int32 { process.wait() }

    deinit {
        if process.isRunning {
            kill(process.pid, SIGKILL)
            _ = process.wait()
        }
    }
}
