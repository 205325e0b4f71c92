import Foundation
import Glibc
import Postgres
@testable import HeraldTestSupport
import Testing

/// SPEC §17: a digest window's end is acted on exactly once, even across a crash. A Herald that
/// has decided the digests of a burst is SIGKILLed before it writes them; another instance then
/// sends each recipient's digest once — none from the killed one, none twice. In a database of
/// its own: every Herald on a database acts on its windows, and the other suites run some.
@Suite("Digests under SIGKILL", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DigestCrashTests {
    @Test("a SIGKILL between deciding and writing the digests: another instance sends each one, once")
    func killBetweenDecidingAndWriting() throws {
        let environment = try TestEnvironment.shared()
        try environment.withDatabaseOfItsOwn(prefix: "digest") { databaseURL in

            let first = try ServerProcess(databaseURL: databaseURL, environment: ["HERALD_TEST_DIGEST_PAUSE_MS": "60000"])
            let members = (0..<20).map { "u\($0)" }
            let app = try environment.makeApp(prefix: "digestcrash", client: first.client)
            try app.patch("/v1/settings/notifications", #"{"replyDigestSeconds": {"value": 5, "userCanOverride": true}}"#, client: first.client)
            #expect(try app.setMembers("g1", members, client: first.client).status == 200)
            let now = nowMilliseconds()
            try app.ingest([Events.message("p", id: "p", sender: "u0", at: now, text: "p")], client: first.client)
            for index in 1...3 {
                try app.ingest([Events.message("r\(index)", id: "r\(index)", sender: "u0", parent: "p", at: now + Int64(index), text: "r\(index)")],
                               client: first.client)
            }
            let decided = first.output.firstLine(containing: "digest windows decided", seconds: 30)
            try #require(decided != nil, "the first instance never reached the pause")
            first.signal(SIGKILL)
            _ = first.wait()

            let connection = try PostgresConnection(connectionString: databaseURL)
            func digests() throws -> [(recipient: String, count: Int)] {
                try connection.query("SELECT recipient, digest_count FROM job_rows WHERE app = \(app.id) AND kind = 'digest' ORDER BY recipient").map { (try $0.decode("recipient"), try $0.decode("digest_count")) }
            }
            #expect(try digests().isEmpty, "the killed instance wrote nothing")
            let open = try connection.query("SELECT count(*)::int AS n FROM digest_windows WHERE app = \(app.id) AND closed_at IS NULL")
            #expect(try open.first?.decode("n", as: Int.self) == members.count - 1, "its windows are still to be acted on")

            let second = try ServerProcess(databaseURL: databaseURL)
            #expect(eventually(seconds: 15) { ((try? digests()) ?? []).count >= members.count - 1 })
            Thread.sleep(forTimeInterval: 1.5)   // a second digest, if any pass made one, would be there by now
            let made = try digests()
            #expect(made.map(\.recipient) == members.dropFirst().sorted(), "one digest per recipient: \(made.map(\.recipient))")
            #expect(made.allSatisfy { $0.count == 2 })
            second.signal(SIGTERM)
            _ = second.wait()
        }
    }
}
