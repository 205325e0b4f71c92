import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Synchronization
@testable import HeraldTestSupport
import Testing

/// `herald` and its subcommands: help texts, usage errors and exit codes (0 ok, 1 failure,
/// 2 usage or configuration).
@Suite("Command line", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct CommandLineTests {
    struct Run {
        let status: Int32
        let output: String
        let errors: String
    }

    func run(_ words: [String], environment: [String: String] = [:]) -> Run {
        let output = Mutex(""), errors = Mutex("")
        let status = CommandLineTool(arguments: ["herald"] + words, environment: environment,
                                     output: { text in output.withLock { $0 += text + "\n" } },
                                     errorOutput: { text in errors.withLock { $0 += text + "\n" } }).run()
        return Run(status: status, output: output.withLock { $0 }, errors: errors.withLock { $0 })
    }

    @Test("--help on the tool and on every command prints its usage to stdout and exits 0",
          arguments: [["--help"], ["help"], ["serve", "--help"], ["migrate", "--help"], ["apps", "--help"], ["keys", "--help"],
                      ["apps", "create", "--help"], ["keys", "list", "--help"]])
    func help(_ words: [String]) {
        let result = run(words)
        #expect(result.status == 0)
        #expect(result.output.contains("Usage: herald"))
        #expect(result.errors.isEmpty)
    }

    @Test("serve --help lists every environment variable")
    func serveHelpListsConfiguration() {
        let result = run(["serve", "--help"])
        for variable in Configuration.variables {
            #expect(result.output.contains(variable.name))
        }
    }

    @Test("usage errors name the problem, print the command's usage on stderr and exit 2",
          arguments: [([String](), "a command is required"), (["frob"], "unknown command \"frob\""),
                      (["serve", "--bogus"], "unexpected argument \"--bogus\""), (["apps"], "apps needs a subcommand"),
                      (["keys"], "keys needs a subcommand"), (["apps", "frob"], "frob"),
                      (["apps", "create"], "apps create takes one app id"), (["keys", "list"], "--app is required"),
                      (["keys", "create", "--app"], "--app needs a value"),
                      (["keys", "create", "--app", "a", "--role", "root"], "role")])
    func usageErrors(_ words: [String], message: String) {
        let result = run(words, environment: ["DATABASE_URL": "postgresql://127.0.0.1:1/none"])
        #expect(result.status == 2, "\(result.errors)")
        #expect(result.errors.contains("herald: "))
        #expect(result.errors.contains(message), "\(result.errors)")
        #expect(result.errors.contains("Usage: herald"))
        #expect(result.output.isEmpty)
    }

    @Test("a missing DATABASE_URL or a bad setting is a configuration error, exit 2",
          arguments: [(["migrate"], [String: String](), "DATABASE_URL is required"),
                      (["apps", "list"], [:], "DATABASE_URL is required"),
                      (["serve"], ["DATABASE_URL": "postgresql://127.0.0.1:1/none", "HERALD_LISTEN": "bogus"], "HERALD_LISTEN"),
                      (["serve"], ["DATABASE_URL": "postgresql://127.0.0.1:1/none", "HERALD_DB_POOL_SIZE": "many"],
                       "HERALD_DB_POOL_SIZE")])
    func configurationErrors(_ words: [String], environment: [String: String], message: String) {
        let result = run(words, environment: environment)
        #expect(result.status == 2, "\(result.errors)")
        #expect(result.errors.contains("herald: configuration: "))
        #expect(result.errors.contains(message), "\(result.errors)")
    }

    @Test("an unreachable database is a failure, exit 1, and the URL's password is not printed")
    func unreachableDatabase() {
        let result = run(["apps", "list"], environment: ["DATABASE_URL": "postgresql://herald:s3cret-pw@127.0.0.1:1/none"])
        #expect(result.status == 1)
        #expect(result.errors.contains("herald: database: "))
        #expect(!result.errors.contains("s3cret-pw"))
    }

    @Test("apps and keys against the database: create, duplicate (exit 1), --exists-ok, list, key create and revoke")
    func appsAndKeys() throws {
        let url = try #require(ProcessInfo.processInfo.environment["DATABASE_URL"])
        let environment = ["DATABASE_URL": url]
        _ = try TestEnvironment.shared() // migrated
        let id = "cli-\(UUID().uuidString.prefix(8).lowercased())"
        #expect(run(["apps", "create", id], environment: environment).status == 0)
        let again = run(["apps", "create", id], environment: environment)
        #expect(again.status == 1)
        #expect(again.errors.contains("exists"))
        #expect(run(["apps", "create", id, "--exists-ok"], environment: environment).status == 0)
        #expect(run(["apps", "list"], environment: environment).output.contains(id))
        let created = run(["keys", "create", "--app", id, "--role", "worker", "--label", "cli test"], environment: environment)
        #expect(created.status == 0)
        let key = try #require(try JSONSerialization.jsonObject(with: Data(created.output.utf8)) as? [String: Any])
        #expect((key["key"] as? String)?.hasPrefix("hk_") == true)
        let keyID = try #require(key["id"] as? String)
        let listed = run(["keys", "list", "--app", id], environment: environment)
        #expect(listed.output.contains(keyID))
        #expect(!listed.output.contains(key["key"] as! String), "a listing never shows the secret")
        #expect(run(["keys", "revoke", "--app", id, keyID], environment: environment).status == 0)
        #expect(run(["keys", "revoke", "--app", id, "k-missing"], environment: environment).status == 1)
        #expect(run(["keys", "create", "--app", "no-such-app-\(id)", "--role", "worker"], environment: environment).status == 1)
    }
}
