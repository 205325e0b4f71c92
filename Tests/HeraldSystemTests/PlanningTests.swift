import Foundation
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Postgres
import Testing

/// How Herald's statements are planned, as the database's own log shows it (auto_explain on a
/// cluster of the test's own): planned again once a table has doubled (`PlanRefresher`,
/// `PostgresPool.replan()`: a plan made on a table of a few pages reads it whole, even through a
/// key, and a connection keeps it until an ANALYZE), and never JIT-compiled.
@Suite("How Herald's statements are planned", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PlanningTests {
    /// Each statement's plan with the rows each node read, from the cluster's log (auto_explain).
    static let planLogging = [
        "session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0", "auto_explain.log_analyze = on",
        "auto_explain.log_timing = off", "auto_explain.log_nested_statements = on",
    ]

    @Test("a round of replies after the tables grew reads its rows through their keys, not whole tables")
    func roundAfterGrowth() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let admin = try PostgresConnection(connectionString: cluster.url)
        for setting in Self.planLogging {
            try admin.execute(unsafeSQL: "ALTER DATABASE herald SET \(setting)")
        }
        var configuration = try TestEnvironment.configuration(databaseURL: cluster.url)
        configuration.planCheckSeconds = 0.2
        let logs = LogRecorder()
        let server = try HeraldServer(configuration: configuration, logger: Logger(level: .info) { logs.append($0) })
        try server.start()
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        #expect(try client.post("/v1/apps", token: TestEnvironment.adminToken, json: #"{"id":"grow"}"#).status == 201)
        let key = try client.post("/v1/apps/grow/keys", token: TestEnvironment.adminToken, json: #"{"role":"ingest"}"#).json["key"] as? String
        let ingestKey = try #require(key)
        func post(_ event: [String: Any]) throws {
            let answer = try client.post("/v1/events", token: ingestKey, json: Events.json(event),
                                         headers: ["Content-Type": "application/cloudevents+json"])
            #expect(answer.status == 200 || answer.status == 202, "\(answer.status) \(answer.text)")
        }
        /// The refresher's "planned again" log lines so far.
        func noticed() -> [String] { logs.all.filter { $0.contains("statements planned again") } }
        // The app's other parents first (written directly, triggers off: only their size matters
        // here; the tables locked meanwhile, so that the refresher reads their sizes once the rows
        // are committed), and statistics gathered then: the index of replies
        // (messages_replies_by_time, partial) is empty, and the planner believes it so until the
        // next ANALYZE.
        let base = Int64(Date().timeIntervalSince1970 * 1000) - 60_000
        try admin.execute(unsafeSQL: """
            BEGIN;
            LOCK TABLE messages IN ACCESS EXCLUSIVE MODE;
            SET LOCAL session_replication_role = replica;
            INSERT INTO messages (app, id, conversation_id, receiver_type, group_id, sender, sent_at, text, created_seen, event_source, event_id)
            SELECT 'grow', 'q' || i, 'group_g1', 'group', 'g1', 'u0', \(base), 'hi', true, 'chat', 'q' || i FROM generate_series(1, 20000) i;
            COMMIT;
            ANALYZE messages;
            """)
        // A thread and replies, one a request, while the other tables are a page or two: each
        // statement of a round is planned (and, prepared, has its generic plan after five runs) on them.
        try post(Events.message("p", id: "p1", sender: "u0", at: base))
        for n in 1...8 {
            try post(Events.message("r\(n)", id: "r\(n)", sender: "u\(n % 4)", parent: "p1", at: base + Int64(n)))
        }
        // Then their threads, 20,000 replies and a subscriber each.
        let seen = noticed().count
        try admin.execute(unsafeSQL: """
            BEGIN;
            LOCK TABLE messages, threads, subscriptions IN ACCESS EXCLUSIVE MODE;
            SET LOCAL session_replication_role = replica;
            INSERT INTO threads (app, parent_id, conversation_id, receiver_type, group_id, author, parent_seen, parent_sent_at, reply_count, updated_at)
            SELECT 'grow', 'q' || i, 'group_g1', 'group', 'g1', 'u0', true, \(base), 1, \(base) FROM generate_series(1, 20000) i;
            INSERT INTO messages (app, id, conversation_id, receiver_type, group_id, sender, parent_id, parent_sender, sent_at, text,
                                  created_seen, event_source, event_id)
            SELECT 'grow', 'qr' || i, 'group_g1', 'group', 'g1', 'u1', 'q' || i, 'u0', \(base), 'hi', true, 'chat', 'qr' || i
              FROM generate_series(1, 20000) i;
            INSERT INTO subscriptions (app, uid, thread_id, subscribed, source, reason, since, updated_at)
            SELECT 'grow', 'u0', 'q' || i, true, 'auto', 'started', \(base), \(base) FROM generate_series(1, 20000) i;
            COMMIT;
            """)
        // The refresher notices, and gathers the grown tables' statistics before the plans are made
        // again (its look at the parents' growth may come before or after)
        func fields(_ line: String) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] ?? [:]
        }
        func grew(_ line: String) -> Bool {
            Set(fields(line)["tables"] as? [String] ?? []).isSuperset(of: ["threads", "subscriptions"])
        }
        #expect(eventually(seconds: 20) { noticed().dropFirst(seen).contains(where: grew) }, "the refresher noticed the tables' growth")
        let grownLine = noticed().dropFirst(seen).first(where: grew) ?? ""
        #expect(Set(fields(grownLine)["analysed"] as? [String] ?? []).isSuperset(of: ["threads", "subscriptions"]), "\(grownLine)")
        // The next rounds, as the log shows their plans.
        let logFile = cluster.directory + "/postgres.log"
        let before = (try? FileManager.default.attributesOfItem(atPath: logFile)[.size] as? Int) ?? 0
        for n in 9...12 {
            try post(Events.message("r\(n)", id: "r\(n)", sender: "u\(n % 4)", parent: "p1", at: base + Int64(n)))
        }
        let handle = try #require(FileHandle(forReadingAtPath: logFile))
        try handle.seek(toOffset: UInt64(before))
        let plans = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
        #expect(plans.contains("Query Text"), "auto_explain logged the rounds")
        let wide = Self.wideReads(plans, tables: ["threads", "messages", "subscriptions"], atLeast: 1000)
        #expect(wide.isEmpty, "plan nodes that read a grown table whole:\n\(wide.joined(separator: "\n"))")
    }

    /// JIT compilation costs tens of milliseconds at every run of a plan whose estimate passes
    /// `jit_above_cost`, and Herald's statements take milliseconds. Here every statement's
    /// estimate passes it: none may be compiled (in session pooling, where the sessions set it).
    @Test("no statement of a round, a claim or a read is JIT-compiled, whatever its estimated cost")
    func noJIT() throws {
        let cluster = try PrivateCluster()
        defer { cluster.destroy() }
        let admin = try PostgresConnection(connectionString: cluster.url)
        let available = try admin.queryOnce("SELECT pg_jit_available()")[0].decode(0, as: Bool.self)
        try #require(available, "this PostgreSQL has no JIT provider: the test could not fail")
        for setting in Self.planLogging + ["jit = on", "jit_above_cost = 0"] {
            try admin.execute(unsafeSQL: "ALTER DATABASE herald SET \(setting)")
        }
        let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: cluster.url))
        defer { server.shutdown() }
        let client = HTTPClient(port: server.port)
        #expect(try client.post("/v1/apps", token: TestEnvironment.adminToken, json: #"{"id":"jit"}"#).status == 201)
        var keys: [String: String] = [:]
        for role in ["ingest", "worker", "server"] {
            keys[role] = try client.post("/v1/apps/jit/keys", token: TestEnvironment.adminToken, json: #"{"role":"\#(role)"}"#).json["key"] as? String
        }
        let base = Int64(Date().timeIntervalSince1970 * 1000) - 10_000
        var events: [Any] = [Events.message("p", id: "p1", sender: "u0", at: base)]
        for n in 1...6 {
            events.append(Events.message("r\(n)", id: "r\(n)", sender: "u\(n % 3)", parent: "p1", at: base + Int64(n),
                                         mentions: n == 3 ? ["u5"] : []))
        }
        let posted = try client.post("/v1/events", token: keys["ingest"], json: Events.json(events),
                                     headers: ["Content-Type": "application/cloudevents-batch+json"])
        #expect(posted.status == 200, "\(posted.text)")
        let claimed = try client.post("/v1/jobs/claim", token: keys["worker"], json: #"{"max": 100}"#)
        #expect(claimed.status == 200 && !(claimed.json["jobs"] as? [Any] ?? []).isEmpty, "\(claimed.text)")
        #expect(try client.get("/v1/users/u1/threads", token: keys["server"]).status == 200)
        let log = try String(contentsOfFile: cluster.directory + "/postgres.log", encoding: .utf8)
        #expect(log.contains("Query Text"), "auto_explain logged the statements")
        let compiled = log.components(separatedBy: "LOG:  duration:").filter { $0.contains("JIT:") }
        #expect(compiled.isEmpty, "JIT-compiled statements: \(compiled.prefix(3).joined(separator: "\n"))")
    }

    /// The plan nodes in `log` that read at least `atLeast` rows of one of `tables` (rows × loops)
    /// or removed that many by a filter, and the joins that discarded that many pairs, each with
    /// its statement's first line.
    static func wideReads(_ log: String, tables: [String], atLeast: Int) -> [String] {
        var found: [String] = []
        var statement = ""
        var node = ""
        for line in log.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if let range = line.range(of: "Query Text: ") { statement = String(line[range.upperBound...].prefix(80)) }
            if line.contains("(cost=") { node = line }
            let readsTable = tables.contains { node.contains(" on \($0) ") }
            if readsTable, line == node, let rows = number(after: "actual rows=", in: line),
               let loops = number(after: "loops=", in: line), rows * loops >= atLeast {
                found.append("\(statement) | \(node)")
            }
            if readsTable, let removed = number(after: "Rows Removed by Filter: ", in: line), removed >= atLeast {
                found.append("\(statement) | \(node) | removed \(removed)")
            }
            if let removed = number(after: "Rows Removed by Join Filter: ", in: line), removed >= atLeast {
                found.append("\(statement) | \(node) | join removed \(removed)")
            }
        }
        return found
    }

    static func number(after marker: String, in line: String) -> Int? {
        guard let range = line.range(of: marker) else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }
}
