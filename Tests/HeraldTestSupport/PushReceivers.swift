import Foundation
import Glibc
import Secrets

/// scripts/push_receivers.py in a child process: local stand-ins over TLS for APNs (HTTP/2), FCM
/// (its token endpoint and `messages:send`), a Web Push service and webhook devices, each checking
/// what arrives with libraries Herald did not write. It trusts keys made here (`apnsKey`,
/// `fcmKey`), writes its test CA to `caFile` and a browser's PushSubscription to `subscription`,
/// and prints one JSON line per request (`reports`). Stopped (SIGKILL) and its folder removed
/// when released.
final class PushReceivers {
    let directory: String
    let apnsKey: PrivateKey
    let fcmKey: PrivateKey
    let apnsPort: Int
    let httpsPort: Int
    /// A browser's PushSubscription (JSON text) whose endpoint is the Web Push stand-in.
    let subscription: String
    private let process: Subprocess
    private let output: LineReader

    var caFile: String { directory + "/ca.pem" }
    var apnsEndpoint: String { "https://127.0.0.1:\(apnsPort)" }
    var httpsEndpoint: String { "https://127.0.0.1:\(httpsPort)" }

    init(python: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("herald-push-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard let apnsKey = PrivateKey.ec(curve: "P-256"), let fcmKey = PrivateKey.rsa(bits: 2048) else {
            throw TestSetupError(message: "no test keys")
        }
        self.apnsKey = apnsKey
        self.fcmKey = fcmKey
        try apnsKey.publicKeyPEM.write(toFile: directory + "/apns.pub.pem", atomically: true, encoding: .utf8)
        try fcmKey.publicKeyPEM.write(toFile: directory + "/fcm.pub.pem", atomically: true, encoding: .utf8)
        process = try Subprocess([python, repositoryRoot + "/scripts/push_receivers.py", directory])
        output = LineReader(process.output)
        guard output.firstLine(containing: "ready", seconds: 30) != nil,
              let ports = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/ports.json"))) as? [String: Int],
              let apns = ports["apns"], let https = ports["https"] else {
            kill(process.pid, SIGKILL)
            _ = process.wait()
            throw TestSetupError(message: "the push receivers did not start")
        }
        apnsPort = apns
        httpsPort = https
        subscription = try String(contentsOfFile: directory + "/subscription.json", encoding: .utf8)
    }

    /// Gives the webhook stand-in the secret to verify signatures with.
    func trust(webhookSecret: String) throws {
        try webhookSecret.write(toFile: directory + "/whsec.txt", atomically: true, encoding: .utf8)
    }

    /// What each stand-in said of each request so far: `service`, `ok`, `error`, `path`,
    /// `headers`, `body`.
    var reports: [[String: Any]] {
        output.all.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    deinit {
        kill(process.pid, SIGKILL)
        _ = process.wait()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
