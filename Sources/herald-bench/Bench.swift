import Glibc
import Postgres

/// One line of the report.
struct Row {
    let name: String
    let throughput: String
    let p50: String
    let p99: String
    let goal: String
    let verdict: String
}

/// The bench: a PostgreSQL and a Herald (its own, or given), data, load, and a table.
final class Bench {
    let options: Options
    let host = "127.0.0.1"
    var port = 0
    var adminToken = ""
    var databaseURL = ""
    var heraldPID: pid_t?
    var clusterDirectory: String?
    var rows: [Row] = []
    var notes: [String] = []
    var l2RowsPerSecond = 0.0
    var l1RequestsPerSecond = 0.0
    /// W8's test CA and receiver certificate, made before Herald starts so that it trusts them.
    var directTLS: DirectTLS?
    var directTLSError: String?
    /// Apps of this run, new each time, so that a reused database never answers "duplicate".
    let runID = String(UInt32.random(in: 0...UInt32.max), radix: 16)
    var chatApp: String { "bench-\(runID)" }
    var bigApp: String { "bench-big-\(runID)" }
    var inboxApp: String { "bench-inbox-\(runID)" }

    init(options: Options) {
        self.options = options
    }

    // MARK: setup

    func start() throws {
        if let url = options.databaseURL {
            databaseURL = url
        } else {
            let directory = "/tmp/herald-bench-\(getpid())"
            clusterDirectory = directory
            say("starting PostgreSQL in \(directory) …")
            try run(["bash", "scripts/pg.sh", "init", directory], logPath: "/dev/null")
            try run(["bash", "scripts/pg.sh", "start", directory], logPath: "/dev/null")
            databaseURL = try capture(["bash", "scripts/pg.sh", "url", directory]).trimmingNewlines()
        }
        if let herald = options.heraldURL {
            let parts = herald.replacing("http://", with: "").split(separator: ":")
            port = Int(parts.last ?? "8080") ?? 8080
            adminToken = options.adminToken ?? ""
            heraldPID = options.heraldPID
        } else {
            port = freePort()
            adminToken = "bench-admin-" + String(UInt64.random(in: 0...UInt64.max), radix: 16) + "-token"
            let binary = options.heraldBinary
            var environment = [
                "DATABASE_URL": databaseURL, "HERALD_LISTEN": "127.0.0.1:\(port)", "HERALD_ADMIN_TOKEN": adminToken,
                // W7 and W8 deliver to receivers on 127.0.0.1.
                "HERALD_DELIVERY_ALLOW_PRIVATE": "1",
            ]
            if options.wants("W8") {
                do {
                    let tls = try DirectTLS.make(in: "/tmp/herald-bench-\(getpid())-tls")
                    directTLS = tls
                    environment["HERALD_DELIVERY_CA_FILE"] = tls.caFile
                } catch {
                    directTLSError = "making the test CA failed: \(error)"
                }
            }
            say("starting \(binary) on 127.0.0.1:\(port) (log: /tmp/herald-bench-\(getpid()).log) …")
            heraldPID = try spawn([binary, "serve"], environment: environment, logPath: "/tmp/herald-bench-\(getpid()).log")
        }
        let connection = BenchConnection(host: host, port: port)
        for _ in 0..<300 {
            if let reply = try? connection.request("GET", "/readyz"), reply.status == 200 { return }
            usleep(100_000)
        }
        throw BenchError("Herald did not become ready on port \(port)")
    }

    func stop() {
        if let pid = heraldPID, options.heraldURL == nil {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        if let tls = directTLS { try? run(["rm", "-rf", tls.directory]) }
        if let directory = clusterDirectory {
            try? run(["bash", "scripts/pg.sh", "stop", directory], logPath: "/dev/null")
            try? run(["rm", "-rf", directory])
        }
    }

    func database() throws -> PostgresConnection {
        try PostgresConnection(connectionString: databaseURL, applicationName: "herald-bench")
    }

    /// Creates an app (or reuses it) and returns its keys by role.
    func makeApp(_ id: String) throws -> [String: String] {
        let connection = BenchConnection(host: host, port: port)
        let created = try connection.request("POST", "/v1/apps", token: adminToken, json: #"{"id":"\#(id)"}"#)
        guard created.status == 201 || created.status == 409 else { throw BenchError("create app: \(created.status) \(created.text)") }
        var keys: [String: String] = [:]
        for role in ["ingest", "worker", "server"] {
            let reply = try connection.request("POST", "/v1/apps/\(id)/keys", token: adminToken, json: #"{"role":"\#(role)","label":"bench"}"#)
            guard reply.status == 201, let key = field(reply.text, "key") else { throw BenchError("create key: \(reply.status) \(reply.text)") }
            keys[role] = key
        }
        return keys
    }

    func count(_ sql: SQL) throws -> Int {
        try database().query(sql)[0].decode(0, as: Int?.self) ?? 0
    }

    /// Rows inserted, updated and deleted in user tables so far (statistics flush within ~1 s).
    func rowsWritten() throws -> Int {
        try count("SELECT sum(n_tup_ins + n_tup_upd + n_tup_del)::bigint FROM pg_stat_user_tables")
    }

    func add(_ name: String, _ throughput: String, _ result: LoadResult?, goal: String = "", met: Bool? = nil) {
        rows.append(Row(name: name, throughput: throughput,
                        p50: result.map { format($0.percentile(0.50), digits: 2) + " ms" } ?? "",
                        p99: result.map { format($0.percentile(0.99), digits: 2) + " ms" } ?? "",
                        goal: goal, verdict: met.map { $0 ? "met" : "missed" } ?? ""))
    }

    func printTable() {
        let header = ["measure", "throughput", "p50", "p99", "goal", "result"]
        let body = rows.map { [$0.name, $0.throughput, $0.p50, $0.p99, $0.goal, $0.verdict] }
        var widths = header.map(\.count)
        for line in body { for (index, cell) in line.enumerated() { widths[index] = max(widths[index], cell.count) } }
        func render(_ cells: [String]) -> String {
            "| " + cells.enumerated().map { $0.element.padding(to: widths[$0.offset]) }.joined(separator: " | ") + " |"
        }
        say("")
        say(render(header))
        say("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
        for line in body { say(render(line)) }
        for note in notes { say("- " + note) }
    }
}

/// `"name":"value"` from a JSON text (for the few fields the bench reads).
func field(_ text: String, _ name: String) -> String? {
    guard let range = text.firstRange(of: "\"\(name)\":\"") ?? text.firstRange(of: "\"\(name)\": \"") else { return nil }
    let rest = text[range.upperBound...]
    guard let end = rest.firstIndex(of: "\"") else { return nil }
    return String(rest[..<end])
}

func format(_ value: Double, digits: Int = 0) -> String {
    if digits == 0 {
        let rounded = Int(value.rounded())
        var text = String(rounded)
        var index = text.count - 3
        while index > 0 {
            text.insert(",", at: text.index(text.startIndex, offsetBy: index))
            index -= 3
        }
        return text
    }
    var factor = 1.0
    for _ in 0..<digits { factor *= 10 }
    let scaled = Int((value * factor).rounded())
    let whole = scaled / Int(factor), fraction = scaled % Int(factor)
    let fractionText = String(fraction)
    return "\(whole)." + String(repeating: "0", count: digits - fractionText.count) + fractionText
}

extension String {
    func padding(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    func trimmingNewlines() -> String {
        var text = self
        while text.last == "\n" || text.last == "\r" || text.last == " " { text.removeLast() }
        return text
    }
}
