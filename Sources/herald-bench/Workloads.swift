import Glibc
import Postgres
import Synchronization

extension Bench {
    // MARK: L1, the HTTP ceiling

    /// GET /healthz with 2 threads × 16 keep-alive connections, each thread sending one request
    /// on every connection and then reading the answers.
    func httpCeiling() {
        say("L1: GET /healthz …")
        let port = self.port, host = self.host
        let result = runLoad(workers: 2, seconds: options.seconds) { _, log in
            let connections = ThreadLocalConnections.get(host: host, port: port, count: 16)
            let started = now()
            for connection in connections { try connection.send("GET", "/healthz") }
            for connection in connections {
                let reply = try connection.receive()
                log.record(started, ok: reply.status == 200, error: "status \(reply.status)")
            }
            return true
        }
        l1RequestsPerSecond = result.perSecond
        add("L1 HTTP ceiling: GET /healthz (32 connections)", format(result.perSecond) + " req/s", result)
    }

    // MARK: L2, the database ceiling

    /// Job-sized rows (about 400 bytes, a bigserial key) inserted 1,000 per statement with
    /// `INSERT … SELECT FROM unnest(…)` on one connection, each statement its own transaction.
    func databaseCeiling() throws {
        say("L2: INSERT of job-sized rows …")
        let connection = try database()
        try connection.execute(unsafeSQL: """
            DROP TABLE IF EXISTS bench_l2;
            CREATE TABLE bench_l2 (id bigserial PRIMARY KEY, app text NOT NULL, event_source text NOT NULL, event_id text NOT NULL,
                                   recipient text NOT NULL, message_id text NOT NULL, kind text NOT NULL, reason text NOT NULL,
                                   payload jsonb NOT NULL, state text NOT NULL DEFAULT 'ready', created_at bigint NOT NULL DEFAULT 0)
            """)
        defer { try? connection.execute(unsafeSQL: "DROP TABLE IF EXISTS bench_l2") }
        let payload = #"{"data": {"app": "bench", "kind": "reply", "sender": "u17-3", "groupId": "g17", "messageId": "rm-123456", "parentId": "p17-2"}, "notification": {"body": "reply number 123456 in a bench thread", "badge": 3, "title": "u17-3 replied in a thread"}}"#
        let batches = Ticket(limit: Int.max)
        let result = runLoad(workers: 1, seconds: options.seconds) { _, log in
            let started = now()
            let batch = batches.take()!
            let ids = (0..<1000).map { "r-\(batch)-\($0)" }
            try connection.query("""
                INSERT INTO bench_l2 (app, event_source, event_id, recipient, message_id, kind, reason, payload)
                SELECT 'bench', 'bench', e, 'u' || e, 'rm-' || e, 'reply', 'subscribed', \(payload)::jsonb FROM unnest(\(ids)::text[]) AS e
                """)
            log.record(started, ok: true, count: 1000)
            return true
        }
        l2RowsPerSecond = result.perSecond
        add("L2 database ceiling: INSERT 1,000 job rows per statement", format(result.perSecond) + " rows/s", result)
    }

    // MARK: W1 and W2, ingest

    struct Chat {
        let groups: Int
        let members: Int
        let threadsPerGroup: Int
        let base: Int64
    }

    /// 1,000 groups of 50 members, 5 threads each, app default replies = SUBSCRIBE_TO_SUBSCRIBED_THREADS.
    func prepareChat() throws -> (keys: [String: String], chat: Chat) {
        let keys = try makeApp(chatApp)
        let chat = Chat(groups: options.quick ? 200 : 1000, members: 50, threadsPerGroup: 5,
                        base: Int64(time(nil)) * 1000 - 3_600_000)
        let connection = BenchConnection(host: host, port: port)
        let settings = try connection.request("PATCH", "/v1/settings/notifications", token: keys["server"],
                                              json: #"{"groupPreferences":{"replies":{"value":"SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}}"#)
        guard settings.status == 200 else { throw BenchError("settings: \(settings.status) \(settings.text)") }
        say("W1 setup: \(chat.groups) groups × \(chat.members) members, \(chat.threadsPerGroup) threads each …")
        let groups = Ticket(limit: chat.groups)
        let host = self.host, port = self.port
        let memberSetup = runLoad(workers: 4) { _, log in
            guard let group = groups.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let members = (0..<chat.members).map { "\"u\(group)-\($0)\"" }.joined(separator: ",")
            let started = now()
            let reply = try connection.request("PUT", "/v1/groups/g\(group)/members", token: keys["server"],
                                               json: "{\"members\":[\(members)]}")
            log.record(started, ok: reply.status == 200, error: reply.text)
            // every tenth member holds a level (SPEC §18); `all` here notifies them of every reply
            // in the group, where the app's default is subscribed threads only
            try Bench.setLevels(connection, keys: keys, group: "g\(group)", members: (0..<chat.members).map { "u\(group)-\($0)" })
            return true
        }
        guard memberSetup.errors == 0 else { throw BenchError("member setup failed") }
        var parents: [String] = []
        for group in 0..<chat.groups {
            for thread in 0..<chat.threadsPerGroup {
                parents.append(Self.message(event: "p-\(group)-\(thread)", id: "p\(group)-\(thread)", sender: "u\(group)-\(thread)",
                                            group: group, parent: nil, at: chat.base, mention: nil))
            }
        }
        for start in stride(from: 0, to: parents.count, by: 100) {
            let reply = try connection.request("POST", "/v1/events", token: keys["ingest"], contentType: "application/cloudevents-batch+json",
                                               body: Array(("[" + parents[start..<min(parents.count, start + 100)].joined(separator: ",") + "]").utf8))
            guard reply.status == 200 else { throw BenchError("parents: \(reply.status) \(reply.text)") }
        }
        return (keys, chat)
    }

    static func message(event: String, id: String, sender: String, group: Int, parent: String?, at: Int64, mention: String?) -> String {
        groupMessage(event: event, id: id, sender: sender, group: "g\(group)", parent: parent, at: at, mention: mention)
    }

    /// Reply number n: a random member replies in a random thread; one in ten mentions a member.
    static func reply(_ n: Int, chat: Chat) -> String {
        var random = SplitMix(seed: UInt64(n))
        let group = random.next(chat.groups), thread = random.next(chat.threadsPerGroup)
        let sender = random.next(chat.members)
        let mention = random.next(10) == 0 ? "u\(group)-\(random.next(chat.members))" : nil
        return message(event: "r-\(n)", id: "rm-\(n)", sender: "u\(group)-\(sender)", group: group, parent: "p\(group)-\(thread)",
                       at: chat.base + 1000 + Int64(n), mention: mention)
    }

    /// Posts `body`, retrying on 429/503 (as a bus would); false unless every event was accepted.
    static func post(_ connection: BenchConnection, key: String?, contentType: String, body: [UInt8], expect: Int,
                     retries: inout Int) throws -> Bool {
        while true {
            let reply = try connection.request("POST", "/v1/events", token: key, contentType: contentType, body: body)
            if reply.status == 429 || reply.status == 503 {
                retries += 1
                usleep(20_000)
                continue
            }
            if contentType == "application/cloudevents+json" { return reply.status == 200 || reply.status == 202 }
            return reply.status == 200 && reply.text.hasPrefix("{\"accepted\":\(expect),")
        }
    }

    /// Posts events 0..<total, `event(n)` each, in batches of 100 over 4 connections (retrying
    /// 429/503 as a bus would); returns the load and how many retries there were.
    func postBatches(total: Int, key: String?, event: @escaping @Sendable (Int) -> String) -> (LoadResult, Counter) {
        let batches = Ticket(limit: total / 100)
        let host = self.host, port = self.port
        let retries = Counter()
        let result = runLoad(workers: 4) { _, log in
            guard let batch = batches.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let body = "[" + (batch * 100..<(batch + 1) * 100).map(event).joined(separator: ",") + "]"
            let started = now()
            var retried = 0
            let ok = try Self.post(connection, key: key, contentType: "application/cloudevents-batch+json",
                                   body: Array(body.utf8), expect: 100, retries: &retried)
            retries.add(retried)
            log.record(started, ok: ok, count: 100, error: "a batch was not wholly accepted")
            return true
        }
        return (result, retries)
    }

    func ingestBatches(keys: [String: String], chat: Chat) throws {
        let total = options.quick ? 20_000 : 60_000
        let jobsBefore = try count("SELECT count(*) FROM jobs WHERE app = \(chatApp)")
        let rowsBefore = try rowsWritten()
        if let pid = heraldPID { resetPeakMemory(pid) }
        say("W1: \(format(Double(total))) replies in batches of 100, 4 connections …")
        let (result, retries) = postBatches(total: total, key: keys["ingest"]) { Self.reply($0, chat: chat) }
        let peak = heraldPID.map { processMemory($0, "VmHWM") } ?? 0
        usleep(1_500_000)
        let jobs = try count("SELECT count(*) FROM jobs WHERE app = \(chatApp)") - jobsBefore
        let written = try rowsWritten() - rowsBefore
        let rowsPerSecond = Double(written) / result.seconds
        add("W1 ingest: batches of 100, 4 connections", format(result.perSecond) + " events/s", result,
            goal: "≥ 5,000 events/s", met: result.perSecond >= 5000 && result.errors == 0)
        add("W1 jobs produced", format(Double(jobs) / result.seconds) + " jobs/s", nil)
        add("W1 database rows written", format(rowsPerSecond) + " rows/s",
            nil, goal: l2RowsPerSecond > 0 ? "≥ 0.5 of L2: " + format(rowsPerSecond / l2RowsPerSecond, digits: 2) : "",
            met: l2RowsPerSecond > 0 ? rowsPerSecond >= 0.5 * l2RowsPerSecond : nil)
        if heraldPID != nil {
            add("W1 Herald peak RSS", format(Double(peak) / 1_048_576, digits: 1) + " MB", nil, goal: "≤ 150 MB", met: peak <= 150 << 20)
        }
        notes.append("W1: \(format(Double(total))) events, \(result.errors) failed batches, \(retries.value) retries after 429/503, "
                     + "\(format(Double(jobs))) jobs, \(format(Double(written))) rows written in \(format(result.seconds, digits: 1)) s.")
    }

    // MARK: W6, reactions

    /// Reaction number n: a random member reacts to a random thread's parent, written by another
    /// member; with the default `reactions` preference, its author alone is notified.
    static func reaction(_ n: Int, chat: Chat, at: Int64) -> String {
        var random = SplitMix(seed: UInt64(n) &+ 0x5EED)
        let group = random.next(chat.groups), thread = random.next(chat.threadsPerGroup)
        let reactor = (thread + 1 + random.next(chat.members - 1)) % chat.members   // never the parent's author, u<group>-<thread>
        let data = "\"id\":\"rx-\(n)\",\"messageId\":\"p\(group)-\(thread)\",\"reactor\":\"u\(group)-\(reactor)\",\"reaction\":\"👍\","
            + "\"receiverType\":\"group\",\"receiver\":\"g\(group)\",\"at\":\(at + Int64(n))"
        return "{\"specversion\":\"1.0\",\"id\":\"react-\(n)\",\"source\":\"bench\",\"type\":\"reaction.added\",\"data\":{\(data)}}"
    }

    /// W6: 10,000 `reaction.added` on the W1 chat's thread parents, batches of 100, 4 connections.
    func ingestReactions(keys: [String: String], chat: Chat) throws {
        let total = options.quick ? 2_000 : 10_000
        let jobsBefore = try count("SELECT count(*) FROM jobs WHERE app = \(chatApp) AND kind = 'reaction'")
        let rowsBefore = try rowsWritten()
        // after the members' snapshot: a reaction notifies those with access at its time
        let at = Int64(time(nil)) * 1000
        say("W6: \(format(Double(total))) reactions in batches of 100, 4 connections …")
        let (result, retries) = postBatches(total: total, key: keys["ingest"]) { Self.reaction($0, chat: chat, at: at) }
        usleep(500_000)
        let jobs = try count("SELECT count(*) FROM jobs WHERE app = \(chatApp) AND kind = 'reaction'") - jobsBefore
        let written = try rowsWritten() - rowsBefore
        let rowsPerSecond = Double(written) / result.seconds
        add("W6 ingest: reactions in batches of 100, 4 connections", format(result.perSecond) + " events/s", result,
            goal: "(next to W1)", met: result.errors == 0 && jobs == total ? nil : false)
        add("W6 database rows written", format(rowsPerSecond) + " rows/s", nil,
            goal: l2RowsPerSecond > 0 ? "of L2: " + format(rowsPerSecond / l2RowsPerSecond, digits: 3) : "")
        notes.append("W6: \(format(Double(total))) reactions, \(result.errors) failed batches, \(retries.value) retries after 429/503, "
                     + "\(format(Double(jobs))) reaction jobs (one per reaction: its message's author), \(format(Double(written))) rows "
                     + "written in \(format(result.seconds, digits: 1)) s.")
    }

    func ingestSingles(keys: [String: String], chat: Chat) throws {
        let events = Ticket(limit: Int.max)
        let host = self.host, port = self.port
        say("W2: replies one per request, 32 connections, \(format(options.seconds)) s …")
        let retries = Counter()
        let result = runLoad(workers: 32, seconds: options.seconds) { _, log in
            guard let n = events.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let body = Self.reply(1_000_000 + n, chat: chat)
            let started = now()
            var retried = 0
            let ok = try Self.post(connection, key: keys["ingest"], contentType: "application/cloudevents+json",
                                   body: Array(body.utf8), expect: 1, retries: &retried)
            retries.add(retried)
            log.record(started, ok: ok, error: "an event was not accepted")
            return true
        }
        add("W2 ingest: one event per request, 32 connections", format(result.perSecond) + " events/s", result,
            goal: "≥ 2,000 events/s, no 429", met: result.perSecond >= 2000 && retries.value == 0 && result.errors == 0)
        notes.append("W2: \(format(Double(result.operations))) events, \(result.errors) failed, \(retries.value) retries after 429/503.")
    }

    // MARK: W3, a big group

    func bigFanout() throws -> [String: String] {
        let members = options.quick ? 20_000 : 100_000
        let keys = try makeApp(bigApp)
        let connection = BenchConnection(host: host, port: port)
        say("W3 setup: a group of \(format(Double(members))) members and its first message …")
        let list = (0..<members).map { "\"b\($0)\"" }.joined(separator: ",")
        let put = try connection.request("PUT", "/v1/groups/big/members", token: keys["server"], json: "{\"members\":[\(list)]}")
        guard put.status == 200 else { throw BenchError("big group: \(put.status) \(put.text)") }
        let base = Int64(time(nil)) * 1000 - 60_000
        func send(_ event: String) throws {
            let reply = try connection.request("POST", "/v1/events", token: keys["ingest"], contentType: "application/cloudevents+json",
                                               body: Array(event.utf8))
            guard reply.status == 200 || reply.status == 202 else { throw BenchError("big post: \(reply.status) \(reply.text)") }
        }
        let db = try database()
        func waitDone(_ eventID: String) throws {
            while try db.query("SELECT coalesce(bool_and(done), false) FROM fanout_tasks WHERE app = \(bigApp) AND event_id = \(eventID)")[0].decode(0, as: Bool.self) == false {
                usleep(10_000)
            }
        }
        let parent = Self.groupMessage(event: "big-p", id: "bigp", sender: "b0", group: "big", parent: nil, at: base, mention: nil)
        try send(parent)
        try waitDone("big-p")
        say("W3: one reply …")
        let reply = Self.groupMessage(event: "big-r", id: "bigr", sender: "b1", group: "big", parent: "bigp", at: base + 1000, mention: nil)
        let started = now()
        try send(reply)
        try waitDone("big-r")
        let seconds = Double(now() - started) / 1_000_000_000
        let jobs = try count("SELECT count(*) FROM jobs WHERE app = \(bigApp) AND message_id = 'bigr'")
        add("W3 fan-out: one reply to \(format(Double(members))) members", format(seconds, digits: 2) + " s to commit all jobs",
            nil, goal: "≤ 1 s (issue 33)", met: seconds <= 1 && jobs == members - 1)
        notes.append("W3: \(format(Double(jobs))) jobs committed, \(format(Double(jobs) / seconds)) jobs/s.")
        return keys
    }

    // MARK: W5, jobs

    func jobs(keys: [String: String]) throws {
        // Two devices per member (SPEC §13.1): every claimed job carries its recipient's devices.
        let devices = try database().query("""
            INSERT INTO devices (app, uid, id, platform, token, topic)
            SELECT \(bigApp), 'b' || g, d.id, d.platform, d.id || '-token-' || g, CASE WHEN d.platform = 'apns' THEN 'com.example.chat' END
              FROM generate_series(0, \(options.quick ? 20_000 : 100_000)::int - 1) AS g
             CROSS JOIN (VALUES ('phone', 'apns'), ('tablet', 'fcm')) AS d(id, platform)
            ON CONFLICT DO NOTHING
            """).affectedRows
        let ready = try count("SELECT count(*) FROM jobs WHERE app = \(bigApp) AND state = 'ready'")
        say("W5: 4 workers claim 100 and ack, \(format(Double(ready))) jobs ready, \(format(Double(devices))) devices (2 per user) …")
        let host = self.host, port = self.port
        let worker = keys["worker"]
        let result = runLoad(workers: 4, seconds: options.seconds) { _, log in
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let started = now()
            let claimed = try connection.request("POST", "/v1/jobs/claim", token: worker, json: #"{"max":100,"leaseSeconds":60}"#)
            guard claimed.status == 200 else { throw BenchError("claim: \(claimed.status)") }
            let handles = Self.jobHandles(claimed.body)
            if handles.isEmpty { return false }
            let ack = "{\"jobs\":[" + handles.map { "{\"id\":\"\($0.id)\",\"attempt\":\($0.attempt)}" }.joined(separator: ",") + "]}"
            let acked = try connection.request("POST", "/v1/jobs/ack", token: worker, json: ack)
            log.record(started, ok: acked.status == 200 && acked.text.hasPrefix("{\"acked\":\(handles.count),"), count: handles.count,
                       error: "ack: \(acked.status) \(acked.text.prefix(200))")
            return true
        }
        add("W5 jobs: 4 workers, claim 100 + ack (per round), 2 devices per user", format(result.perSecond) + " jobs/s", result,
            goal: "≥ 50,000 jobs/s (issue 33)" + (l2RowsPerSecond > 0 ? ", " + format(result.perSecond / l2RowsPerSecond, digits: 3) + " of L2" : ""),
            met: result.perSecond >= 50_000)
    }

    /// The (id, attempt) of each job of a claim's answer, read without a JSON parser: a job is
    /// an object that starts `{"id":"j…","attempt":N` (Herald writes its fields in that order;
    /// a device's object starts with `{"id"` too, but not with a job id and an attempt). One
    /// pass over the bytes that looks only at each `{`: the bench shares the machine's two cores
    /// with Herald and PostgreSQL, and a scan that compared every quote with a key was a tenth
    /// of W5's CPU.
    static func jobHandles(_ body: [UInt8]) -> [(id: String, attempt: Int)] {
        let head = Array("{\"id\":\"j".utf8), middle = Array("\",\"attempt\":".utf8)
        let brace = UInt8(ascii: "{"), quote = UInt8(ascii: "\"")
        var handles: [(id: String, attempt: Int)] = []
        let count = body.count
        var index = 0
        func matches(_ key: [UInt8], at start: Int) -> Bool {
            guard start + key.count <= count else { return false }
            for offset in 0..<key.count where body[start + offset] != key[offset] { return false }
            return true
        }
        while index < count {
            guard body[index] == brace, matches(head, at: index) else {
                index += 1
                continue
            }
            let idStart = index + head.count - 1   // the "j"
            var end = idStart
            while end < count, body[end] != quote { end += 1 }
            guard matches(middle, at: end) else {
                index = end
                continue
            }
            var digit = end + middle.count, attempt = 0
            while digit < count, body[digit] >= 48, body[digit] <= 57 {
                attempt = attempt * 10 + Int(body[digit] - 48)
                digit += 1
            }
            handles.append((String(decoding: body[idStart..<end], as: UTF8.self), max(attempt, 1)))
            index = digit
        }
        return handles
    }

    // MARK: W4, the inbox

    func inbox() throws {
        let threads = options.quick ? 100_000 : 1_000_000
        say("W4 setup: \(format(Double(threads))) threads, \(format(Double(threads * 5))) subscriptions (a few minutes) …")
        try run(["psql", databaseURL, "-q", "-v", "app=\(inboxApp)", "-v", "threads=\(threads)", "-v", "groups=\(threads / 100)", "-v", "per_group=20",
                 "-v", "subs_per_thread=5", "-v", "heavy_threads=5000", "-f", "scripts/inbox-data.sql"], logPath: "/dev/null")
        try database().execute(unsafeSQL: "VACUUM ANALYZE subscriptions")
        let keys = try makeApp(inboxApp)
        let connection = BenchConnection(host: host, port: port)
        var cursor = ""
        // The deep page starts after 4,000 threads.
        for _ in 0..<4 {
            let page = try connection.request("GET", "/v1/users/heavy/threads?limit=1000" + (cursor.isEmpty ? "" : "&cursor=" + cursor),
                                              token: keys["server"])
            guard page.status == 200 else { throw BenchError("inbox paging: \(page.status) \(page.text.prefix(200))") }
            guard let next = field(page.text, "next") else { break }
            cursor = next
        }
        let host = self.host, port = self.port
        for connections in [1, 4] {
            for (label, query) in [("first", "limit=30"), ("deep", "limit=30&cursor=" + cursor)] {
                say("W4: \(label) page, \(connections) connection(s) …")
                let result = runLoad(workers: connections, seconds: options.seconds / 2) { _, log in
                    let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
                    let started = now()
                    let reply = try connection.request("GET", "/v1/users/heavy/threads?" + query, token: keys["server"])
                    log.record(started, ok: reply.status == 200, error: "status \(reply.status)")
                    return true
                }
                add("W4 inbox: \(label) page of 30, \(connections) connection(s)", format(result.perSecond) + " req/s", result,
                    goal: "p99 ≤ 10 ms", met: result.percentile(0.99) <= 10 && result.errors == 0)
            }
        }
    }
}

/// Each load thread's own connections, made on first use.
enum ThreadLocalConnections {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    final class Box {
        var connections: [BenchConnection] = []
    }

    static func get(host: String, port: Int, count: Int) -> [BenchConnection] {
        let box: Box
        if let pointer = pthread_getspecific(key) {
            box = Unmanaged<Box>.fromOpaque(pointer).takeUnretainedValue()
        } else {
            box = Box()
            pthread_setspecific(key, Unmanaged.passRetained(box).toOpaque())
        }
        while box.connections.count < count { box.connections.append(BenchConnection(host: host, port: port)) }
        return box.connections
    }
}

/// A deterministic generator, so every run posts the same events.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 &+ 1 }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(bound))
    }
}

final class Counter: Sendable {
    private let total = Mutex(0)
    func add(_ amount: Int) { total.withLock { $0 += amount } }
    var value: Int { total.withLock { $0 } }
}
