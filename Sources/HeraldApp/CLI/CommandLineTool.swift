import HeraldAPI
import HeraldDomain
import HeraldStore
import Dispatch
import FoundationEssentials
import Glibc
import JSON
import Postgres

/// The `herald` command: `serve`, `migrate`, `apps …`, `keys …`, each with `--help`.
///
/// Exit codes: 0 success, 1 failure (database, conflict, not found), 2 usage or configuration error.
package struct CommandLineTool {
    package static let version = HeraldVersion.current

    package let arguments: [String]
    package let environment: [String: String]
    package let output: (String) -> Void
    package let errorOutput: (String) -> Void

    package init(arguments: [String], environment: [String: String],
                output: @escaping (String) -> Void = { print($0) },
                errorOutput: @escaping (String) -> Void = { CommandLineTool.writeStandardError($0) }) {
        self.arguments = arguments
        self.environment = environment
        self.output = output
        self.errorOutput = errorOutput
    }

    package struct UsageError: Error {
        package let message: String
        package let help: String
    }

    package struct Failure: Error {
        package let message: String
    }

    package static let mainHelp = """
        herald — notification routing for threaded chat

        Usage: herald <command> [options]

        Commands:
          serve                         migrate the database, then serve HTTP until SIGTERM/SIGINT
          migrate                       apply the SQL migrations and exit
          apps create <id> [--exists-ok]  create an app
          apps list                     list apps
          keys create --app <id> --role <ingest|worker|server> [--label <text>]
                                        create an app key (printed once, as JSON)
          keys list --app <id>          list an app's keys (never their secrets)
          keys revoke --app <id> <keyId>  revoke a key

        Options: --help on any command, --version.
        Configuration comes from the environment; see `herald serve --help`.
        """

    package static var serveHelp: String {
        var text = """
            Usage: herald serve

            Applies pending migrations, then serves the HTTP API. SIGTERM or SIGINT stops accepting
            connections, lets requests in flight finish, closes the database pool and exits 0. A
            background service that ends unexpectedly stops the others the same way, then exits 1.

            Environment:

            """
        for variable in Configuration.variables {
            text += "  " + variable.name.padding(to: 30) + variable.meaning + "\n"
        }
        return text
    }

    package static let migrateHelp = """
        Usage: herald migrate

        Applies the SQL migrations (HERALD_MIGRATIONS_DIR, or sql/ found beside the binary) to
        DATABASE_URL in order, once each. Safe to run twice and from several hosts at once.
        """

    package static let appsHelp = """
        Usage: herald apps create <id> [--exists-ok]
               herald apps list

        An app is a tenant; ids are 1-128 characters without control characters or '/'.
        --exists-ok   succeed when the app exists already
        """

    package static let keysHelp = """
        Usage: herald keys create --app <id> --role <ingest|worker|server> [--label <text>]
               herald keys list --app <id>
               herald keys revoke --app <id> <keyId>

        Roles: ingest (POST /v1/events), worker (jobs API), server (every app route).
        The key is printed once, as JSON; only its hash is stored.
        """

    /// Runs the command and returns the process exit code.
    package func run() -> Int32 {
        do {
            try dispatch()
            return 0
        } catch let error as UsageError {
            errorOutput("herald: \(error.message)\n\n\(error.help)")
            return 2
        } catch let error as ConfigurationError {
            errorOutput("herald: configuration: \(error)")
            return 2
        } catch let error as Failure {
            errorOutput("herald: \(error.message)")
            return 1
        } catch let error as PostgresError {
            errorOutput("herald: database: \(error.message)")
            return 1
        } catch {
            errorOutput("herald: \(error)")
            return 1
        }
    }

    private func dispatch() throws {
        var words = Array(arguments.dropFirst())
        guard let command = words.first else {
            throw UsageError(message: "a command is required", help: Self.mainHelp)
        }
        words.removeFirst()
        switch command {
        case "--help", "-h", "help":
            output(Self.mainHelp)
        case "--version", "version":
            output("herald \(Self.version)")
        case "serve":
            if words.contains(where: { $0 == "--help" || $0 == "-h" }) { return output(Self.serveHelp) }
            try expectNoArguments(words, help: Self.serveHelp)
            try serve()
        case "migrate":
            if words.contains(where: { $0 == "--help" || $0 == "-h" }) { return output(Self.migrateHelp) }
            try expectNoArguments(words, help: Self.migrateHelp)
            try migrate()
        case "apps":
            try apps(words)
        case "keys":
            try keys(words)
        default:
            throw UsageError(message: "unknown command \(command.debugDescription)", help: Self.mainHelp)
        }
    }

    private func expectNoArguments(_ words: [String], help: String) throws {
        if let first = words.first { throw UsageError(message: "unexpected argument \(first.debugDescription)", help: help) }
    }

    /// Splits `--name value` options (and bare `--flag`s) from positional words.
    private func parse(_ words: [String], options: Set<String>, flags: Set<String>, help: String) throws
        -> (options: [String: String], flags: Set<String>, positional: [String]) {
        var values: [String: String] = [:]
        var seenFlags: Set<String> = []
        var positional: [String] = []
        var index = 0
        while index < words.count {
            let word = words[index]
            if word.hasPrefix("--") {
                let name = String(word.dropFirst(2))
                if flags.contains(name) {
                    seenFlags.insert(name)
                } else if options.contains(name) {
                    guard index + 1 < words.count else {
                        throw UsageError(message: "\(word) needs a value", help: help)
                    }
                    values[name] = words[index + 1]
                    index += 1
                } else {
                    throw UsageError(message: "unknown option \(word)", help: help)
                }
            } else {
                positional.append(word)
            }
            index += 1
        }
        return (values, seenFlags, positional)
    }

    private func configuration() throws -> Configuration {
        let configuration = try Configuration(environment: environment)
        guard configuration.databaseURL != nil else {
            throw ConfigurationError(variable: "DATABASE_URL", message: "is required (a libpq URL or conninfo string)")
        }
        return configuration
    }

    private func withDatabase<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let configuration = try configuration()
        let connection = try PostgresConnection(connectionString: configuration.databaseURL!,
                                                prepareStatements: configuration.databasePoolMode == .session)
        defer { connection.close() }
        return try body(connection)
    }

    private func migrate() throws {
        let configuration = try configuration()
        let directory = Migration.locateDirectory(configured: configuration.migrationsDirectory)
        let migrator = try Migrator(directory: directory, mode: configuration.databaseMode)
        let applied = try withDatabase { try migrator.migrate($0) }
        if applied.isEmpty {
            output("schema is current (version \(migrator.latestVersion))")
        } else {
            for migration in applied { output("applied \(migration.name)") }
        }
    }

    private func serve() throws {
        let configuration = try configuration()
        let logger = Logger(level: configuration.logLevel)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        let stop = DispatchSemaphore(value: 0)
        let sources = [SIGTERM, SIGINT].map { number -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.signal() }
            source.resume()
            return source
        }
        let server: HeraldServer
        do {
            // A service that ends unexpectedly has stopped the others when this is called: the
            // wait below ends, and serve exits 1.
            server = try HeraldServer(configuration: configuration, logger: logger) { _ in stop.signal() }
            try server.start()
        } catch {
            logger.error("start failed", ["error": .string(String(describing: error))])
            throw Failure(message: "start failed: \(error)")
        }
        stop.wait()
        server.shutdown()   // after an unexpected end, the services are stopped already
        for source in sources { source.cancel() }
        if let end = server.unexpectedEnd { throw Failure(message: end.description) }
    }

    private func apps(_ words: [String]) throws {
        guard let sub = words.first else { throw UsageError(message: "apps needs a subcommand", help: Self.appsHelp) }
        if sub == "--help" || sub == "-h" || sub == "help" { return output(Self.appsHelp) }
        let parsed = try parse(Array(words.dropFirst()), options: [], flags: ["exists-ok", "help"], help: Self.appsHelp)
        if parsed.flags.contains("help") { return output(Self.appsHelp) }
        let store = TenancyStore()
        switch sub {
        case "create":
            guard parsed.positional.count == 1 else {
                throw UsageError(message: "apps create takes one app id", help: Self.appsHelp)
            }
            let id = parsed.positional[0]
            guard Identifier.isValid(id) else {
                throw UsageError(message: "invalid app id \(id.debugDescription)", help: Self.appsHelp)
            }
            let created = try withDatabase { try store.createApp(id, on: $0) }
            if let created {
                output(json(created))
            } else if parsed.flags.contains("exists-ok") {
                output("app \(id) exists")
            } else {
                throw Failure(message: "app \(id) exists already")
            }
        case "list":
            try expectNoArguments(parsed.positional, help: Self.appsHelp)
            let apps = try withDatabase { try store.listApps(after: nil, limit: Int.max, on: $0) }
            for app in apps { output(app.id) }
        default:
            throw UsageError(message: "unknown apps command \(sub.debugDescription)", help: Self.appsHelp)
        }
    }

    private func keys(_ words: [String]) throws {
        guard let sub = words.first else { throw UsageError(message: "keys needs a subcommand", help: Self.keysHelp) }
        if sub == "--help" || sub == "-h" || sub == "help" { return output(Self.keysHelp) }
        let parsed = try parse(Array(words.dropFirst()), options: ["app", "role", "label"], flags: ["help"], help: Self.keysHelp)
        if parsed.flags.contains("help") { return output(Self.keysHelp) }
        guard let app = parsed.options["app"] else {
            throw UsageError(message: "--app is required", help: Self.keysHelp)
        }
        let store = TenancyStore()
        switch sub {
        case "create":
            try expectNoArguments(parsed.positional, help: Self.keysHelp)
            guard let roleName = parsed.options["role"], let role = Role(rawValue: roleName) else {
                throw UsageError(message: "--role must be ingest, worker or server", help: Self.keysHelp)
            }
            guard let created = try withDatabase({ try store.createKey(app: app, role: role, label: parsed.options["label"], on: $0) }) else {
                throw Failure(message: "no app \(app)")
            }
            output(json(created))
        case "list":
            try expectNoArguments(parsed.positional, help: Self.keysHelp)
            let keys = try withDatabase { try store.listKeys(app: app, on: $0) }
            for key in keys { output(json(key)) }
        case "revoke":
            guard parsed.positional.count == 1 else {
                throw UsageError(message: "keys revoke takes one key id", help: Self.keysHelp)
            }
            guard try withDatabase({ try store.revokeKey(app: app, id: parsed.positional[0], on: $0) }) else {
                throw Failure(message: "app \(app) has no key \(parsed.positional[0])")
            }
            output("revoked \(parsed.positional[0])")
        default:
            throw UsageError(message: "unknown keys command \(sub.debugDescription)", help: Self.keysHelp)
        }
    }

    private func json(_ value: some JSONWritable) -> String {
        value.jsonText
    }

    package static func writeStandardError(_ text: String) {
        let bytes = Array((text + "\n").utf8)
        bytes.withUnsafeBytes { _ = write(2, $0.baseAddress, $0.count) }
    }
}

private extension String {
    func padding(to width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
