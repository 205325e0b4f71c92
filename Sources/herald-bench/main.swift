import Glibc

/// `herald-bench`: measures Herald against this machine's own ceilings and prints a table.
/// `make bench` builds it in release mode and runs it from the project folder.
struct Options {
    var databaseURL: String?
    var heraldURL: String?
    var adminToken: String?
    var heraldPID: pid_t?
    var heraldBinary = ""
    var quick = false
    var seconds = 10.0
    var only: Set<String> = []
    var soakSeconds: Double?

    static let usage = """
        Usage: herald-bench [--quick] [--seconds N] [--only L1,L2,L3,S1,S2,S2D,W1,W2,W3,W4,W5,W6,W7,W8,SOAK] [--soak-seconds N]
                            [--database-url URL] [--herald http://HOST:PORT --admin-token T [--herald-pid PID]]

        Without --database-url, starts a PostgreSQL cluster of its own in /tmp (scripts/pg.sh).
        Without --herald, starts the release `herald` built beside this binary on a free port.
        --quick scales the data down (W1 20k events, W6 2k reactions, W3 20k members, W4 100k threads) for a fast look.
        --seconds is the length of each timed load (default 10); --soak-seconds the soak's (default 300,
        60 with --quick). Run from the project folder.
        W8 (direct delivery) needs the Herald the bench starts (it trusts the bench's test CA) and nghttpd (nghttp2-server).
        """

    init(arguments: [String]) throws {
        var words = arguments.dropFirst()[...]
        func value(_ name: String) throws -> String {
            guard let next = words.popFirst() else { throw BenchError("\(name) needs a value\n\n\(Options.usage)") }
            return next
        }
        while let word = words.popFirst() {
            switch word {
            case "--database-url": databaseURL = try value(word)
            case "--herald": heraldURL = try value(word)
            case "--admin-token": adminToken = try value(word)
            case "--herald-pid": heraldPID = pid_t(try value(word))
            case "--quick": quick = true
            case "--seconds":
                guard let seconds = Double(try value(word)), seconds > 0 else { throw BenchError("--seconds must be a positive number") }
                self.seconds = seconds
            case "--soak-seconds":
                guard let seconds = Double(try value(word)), seconds >= 60 else { throw BenchError("--soak-seconds must be at least 60") }
                soakSeconds = seconds
            case "--only": only = Set(try value(word).uppercased().split(separator: ",").map(String.init))
            case "--help", "-h":
                say(Options.usage)
                exit(0)
            default: throw BenchError("unknown option \(word)\n\n\(Options.usage)")
            }
        }
        if heraldURL != nil && adminToken == nil { throw BenchError("--herald needs --admin-token") }
        let executable = arguments[0]
        let directory = executable.contains("/") ? String(executable[..<executable.lastIndex(of: "/")!]) : "."
        heraldBinary = directory + "/herald"
    }

    func wants(_ name: String) -> Bool { only.isEmpty || only.contains(name) }
}

signal(SIGPIPE, SIG_IGN)
do {
    let options = try Options(arguments: CommandLine.arguments)
    let bench = Bench(options: options)
    defer { bench.stop() }
    try bench.start()
    /// A workload that fails is reported and the others still run.
    func attempt(_ name: String, _ body: () throws -> Void) {
        do { try body() } catch {
            say("    \(name) failed: \(error)")
            bench.notes.append("\(name) failed: \(error)")
        }
    }
    if options.wants("L1") { bench.httpCeiling() }
    if options.wants("L2") { attempt("L2") { try bench.databaseCeiling() } }
    if options.wants("L3") { attempt("L3") { try bench.tokenVerification() } }
    if options.wants("S1") { attempt("S1") { try bench.peerScenario("S1", members: 50, replies: 500, goal: 1000) } }
    var s2: Double?
    if options.wants("S2") { attempt("S2") { s2 = try bench.peerScenario("S2", members: 500, replies: 200, goal: 150) } }
    if options.wants("S2D") {
        // SPEC §17 (issue 36): S2 with every member at a 60-second digest window; goal 3× S2 of this run
        attempt("S2d") {
            try bench.peerScenario("S2d", members: 500, replies: 200, goal: 3 * (s2 ?? 0), digestSeconds: 60,
                                   goalText: s2.map { "≥ 3× S2 (\(format(3 * $0)) replies/s), p99 ≤ 2× p50" } ?? "≥ 3× S2 (run S2 too)")
        }
    }
    if options.wants("W1") || options.wants("W2") || options.wants("W6") {
        attempt("W1/W2/W6") {
            let (keys, chat) = try bench.prepareChat()
            if options.wants("W1") { try bench.ingestBatches(keys: keys, chat: chat) }
            if options.wants("W6") { try bench.ingestReactions(keys: keys, chat: chat) }
            if options.wants("W2") { try bench.ingestSingles(keys: keys, chat: chat) }
        }
    }
    if options.wants("W3") || options.wants("W5") {
        attempt("W3/W5") {
            let keys = try bench.bigFanout()
            if options.wants("W5") { try bench.jobs(keys: keys) }
        }
    }
    if options.wants("W4") { attempt("W4") { try bench.inbox() } }
    if options.wants("W7") { attempt("W7") { try bench.webhookDelivery() } }
    if options.wants("W8") { attempt("W8") { try bench.directDelivery() } }
    if options.wants("SOAK") { attempt("soak") { try bench.soak(seconds: options.soakSeconds ?? (options.quick ? 60 : 300)) } }
    bench.printTable()
} catch {
    say("herald-bench: \(error)")
    exit(1)
}
