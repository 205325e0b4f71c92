import Postgres
import Glibc
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Secrets

/// W8: direct delivery (SPEC §13.4) to local receivers that speak the real protocols over TLS.
/// Two `nghttpd` (Debian's nghttp2-server; HTTP/2 over TLS, ALPN h2) stand in for APNs and for a
/// browser push service; they answer 200 to a POST whose path is a file of their document root,
/// so every APNs token is a file `/3/device/<token>` and every Web Push subscription's endpoint
/// a file `/push/<id>`. Their certificate is signed by a CA the bench makes, which the bench's
/// own Herald trusts through `HERALD_DELIVERY_CA_FILE` (a Herald given with `--herald` cannot:
/// W8 is skipped then). The receivers do not decrypt: the tests check what Herald sends.
///
/// A group of 1,001 members, 500 with an APNs device and 500 with a Web Push subscription (a
/// fresh P-256 key and auth secret each); 100 messages from the member without a device make
/// 100,000 jobs, half pushed to APNs (one HTTP/2 connection, concurrent streams), half encrypted
/// (RFC 8291) and pushed to the push service. Jobs/s = jobs ÷ time from the first post to the
/// moment all are acked (the database, polled every 20 ms). Then the same devices alone, one
/// platform at a time (groups of the 500 APNs members, then of the 500 Web Push members), with
/// Herald's CPU time (`/proc/<pid>/stat`, every thread) over each: the CPU per Web Push message,
/// and its difference from an APNs push of the same job.
struct DirectTLS {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var keyFile: String { directory + "/server.key" }
    var certificateFile: String { directory + "/server.pem" }

    /// A test CA and a P-256 server certificate for 127.0.0.1 signed by it (openssl CLI).
    static func make(in directory: String) throws -> DirectTLS {
        let tls = DirectTLS(directory: directory)
        try run(["mkdir", "-p", directory])
        let quiet = directory + "/openssl.log"
        try writeFile(directory + "/server.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                      + "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
        try run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                 "-subj", "/CN=herald-bench test CA", "-keyout", directory + "/ca.key", "-out", tls.caFile], logPath: quiet)
        try run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
                 "-keyout", tls.keyFile, "-out", directory + "/server.csr"], logPath: quiet)
        try run(["openssl", "x509", "-req", "-in", directory + "/server.csr", "-CA", tls.caFile, "-CAkey", directory + "/ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", directory + "/server.ext", "-out", tls.certificateFile], logPath: quiet)
        return tls
    }
}

extension Bench {
    /// The receivers' program, or nil when it is not installed.
    static func nghttpd() -> String? {
        let path = currentEnvironment()["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/local/sbin", "/usr/bin"]
        return directories.map { $0 + "/nghttpd" }.first { access($0, X_OK) == 0 }
    }

    func directDelivery() throws {
        guard options.heraldURL == nil else {
            skipW8("W8 skipped: it needs a Herald the bench starts itself (that one trusts the bench's test CA through "
                   + "HERALD_DELIVERY_CA_FILE and allows loopback receivers); run without --herald")
            return
        }
        guard let nghttpd = Self.nghttpd() else {
            skipW8("W8 skipped: nghttpd not found (Debian package nghttp2-server; `make bench` installs it)")
            return
        }
        guard let tls = directTLS, let pid = heraldPID else {
            skipW8("W8 skipped: \(directTLSError ?? "no test CA")")
            return
        }
        let app = "bench-w8-\(runID)"
        let host = self.host, port = self.port
        let members = 1000, messages = options.quick ? 20 : 100, phaseMessages = options.quick ? 10 : 40
        let keys = try makeApp(app)
        let connection = BenchConnection(host: host, port: port)

        // the devices: tokens whose paths exist in the receivers' document root
        let root = tls.directory + "/htdocs"
        try run(["mkdir", "-p", root + "/3/device", root + "/push"])
        let apnsPort = freePort(), pushPort = freePort()
        var devices: [(uid: String, body: String)] = []
        for n in 1...members {
            if n % 2 == 1 {
                let token = Secrets.hex(Secrets.randomBytes(32))
                try writeFile(root + "/3/device/" + token, "")
                devices.append(("w\(n)", #"{"platform":"apns","token":"\#(token)"}"#))
            } else {
                let id = Base64URL.encode(Secrets.randomBytes(16))
                try writeFile(root + "/push/" + id, "")
                guard let point = PrivateKey.ec(curve: "P-256")?.p256PublicPoint else { throw BenchError("W8: no P-256 key") }
                let subscription = #"{\"endpoint\":\"https://127.0.0.1:\#(pushPort)/push/\#(id)\",\"keys\":{\"p256dh\":\"\#(Base64URL.encode(point))\",\"auth\":\"\#(Base64URL.encode(Secrets.randomBytes(16)))\"}}"#
                devices.append(("w\(n)", #"{"platform":"webpush","token":"\#(subscription)"}"#))
            }
        }
        let receivers = try [apnsPort, pushPort].map { port in
            try spawn([nghttpd, "-a", "127.0.0.1", "-d", root, "-m", "1000", String(port), tls.keyFile, tls.certificateFile],
                      logPath: tls.directory + "/nghttpd-\(port).log")
        }
        defer {
            for receiver in receivers {
                kill(receiver, SIGTERM)
                var status: Int32 = 0
                waitpid(receiver, &status, 0)
            }
        }
        for port in [apnsPort, pushPort] {
            guard (0..<100).contains(where: { _ in
                if (try? BenchConnection(host: host, port: port).send("GET", "/")) != nil { return true }
                usleep(50_000)
                return false
            }) else { throw BenchError("W8: nghttpd did not listen on \(port) (log: \(tls.directory)/nghttpd-\(port).log)") }
        }

        say("W8 setup: \(format(Double(members))) devices (half APNs, half Web Push), receivers on 127.0.0.1:\(apnsPort) and :\(pushPort) …")
        let keyReply = try connection.request("POST", "/v1/settings/delivery/webpush-keys", token: keys["server"], json: "")
        guard keyReply.status == 201 || keyReply.status == 200 else { throw BenchError("W8 VAPID key: \(keyReply.status) \(keyReply.text)") }
        let shared = devices
        let tickets = Ticket(limit: shared.count)
        let registered = runLoad(workers: 4) { _, log in
            guard let index = tickets.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let started = now()
            let reply = try connection.request("PUT", "/v1/users/\(shared[index].uid)/devices/d1", token: keys["server"], json: shared[index].body)
            log.record(started, ok: reply.status == 200, error: "\(reply.status) \(reply.text)")
            return true
        }
        guard registered.errors == 0 else { throw BenchError("W8 devices: \(registered.errors) failed") }
        let everyone = (0...members).map { "\"w\($0)\"" }
        for (group, list) in [("w8", everyone), ("w8-apns", [everyone[0]] + stride(from: 1, through: members, by: 2).map { everyone[$0] }),
                              ("w8-webpush", [everyone[0]] + stride(from: 2, through: members, by: 2).map { everyone[$0] })] {
            let put = try connection.request("PUT", "/v1/groups/\(group)/members", token: keys["server"], json: "{\"members\":[\(list.joined(separator: ","))]}")
            guard put.status == 200 else { throw BenchError("W8 group: \(put.status) \(put.text)") }
        }
        guard let apnsKey = PrivateKey.ec(curve: "P-256") else { throw BenchError("W8: no P-256 key") }
        let concurrency = 64
        let settings = """
            {"largeGroupThreshold": 100000, "delivery": {"mode": "direct", "timeoutMs": 5000, "concurrency": \(concurrency),
             "apns": {"teamId": "BENCHTEAM1", "keyId": "BENCHKEY01", "topic": "com.example.bench",
                      "privateKey": "\(apnsKey.pkcs8PEM.replacing("\n", with: "\\n"))",
                      "endpoint": "https://127.0.0.1:\(apnsPort)", "sandboxEndpoint": "https://127.0.0.1:\(apnsPort)"},
             "webpush": {"subject": "mailto:bench@example.com"}}}
            """
        let patched = try connection.request("PATCH", "/v1/settings/notifications", token: keys["server"], json: settings)
        guard patched.status == 200 else { throw BenchError("W8 settings: \(patched.status) \(patched.text)") }
        usleep(300_000)   // the instance starts the app's deliverer

        /// Posts `count` messages to `group` one at a time and waits until `expected` jobs of the
        /// app are acked (or nothing moves for 30 s).
        var posted = 0
        func phase(_ group: String, messages count: Int, expected: Int) throws -> Phase {
            let base = Int64(time(nil)) * 1000 - 60_000
            let connection = BenchConnection(host: host, port: port)   // a fresh one: Herald closes idle ones
            let before = Phase.Sample(pid: pid, receivers: receivers)
            for n in 0..<count {
                let id = "w8m\(posted + n)"
                let event = Self.groupMessage(event: "w8-\(posted + n)", id: id, sender: "w0", group: group, parent: nil,
                                              at: base + Int64(posted + n), mention: nil)
                let reply = try connection.request("POST", "/v1/events", token: keys["ingest"], contentType: "application/cloudevents+json",
                                                   body: Array(event.utf8))
                guard reply.status == 200 else { throw BenchError("W8 post: \(reply.status) \(reply.text)") }
            }
            posted += count
            let ingested = now()
            let database = try self.database()
            var acked = 0, lastMove = now()
            while acked < expected, now() - lastMove < 30_000_000_000 {
                usleep(20_000)
                let next = try database.query(Self.acked(app: app))[0].decode(0, as: Int?.self) ?? 0
                if next != acked { lastMove = now() }
                acked = next
            }
            return Phase(before: before, after: Phase.Sample(pid: pid, receivers: receivers), ingestedAt: ingested, acked: acked)
        }

        say("W8: \(messages) messages → \(format(Double(messages * members))) jobs, direct delivery (APNs over HTTP/2, Web Push encrypted), concurrency \(concurrency) …")
        let mixed = try phase("w8", messages: messages, expected: messages * members)
        let half = members / 2
        say("W8: the same devices one platform at a time, \(phaseMessages) messages each …")
        let apnsOnly = try phase("w8-apns", messages: phaseMessages, expected: messages * members + phaseMessages * half)
        let webOnly = try phase("w8-webpush", messages: phaseMessages, expected: messages * members + 2 * phaseMessages * half)

        // the report: every figure against the ceiling of this run (L1, both HTTP requests)
        let expected = messages * members, phaseJobs = phaseMessages * (members / 2)
        let jobsPerSecond = Double(mixed.acked) / mixed.seconds
        let l1 = l1RequestsPerSecond
        func ofL1(_ perSecond: Double) -> String { l1 > 0 ? format(perSecond / l1, digits: 2) + " of L1" : "(run L1 for the ratio)" }
        // one L1 request's CPU on this machine: both cores ÷ L1's requests per second
        let l1Micros = l1 > 0 ? 2e6 / l1 : 0
        func cpu(_ micros: Double, _ unit: String) -> String {
            "Herald CPU " + format(micros, digits: 1) + " µs/\(unit)" + (l1Micros > 0 ? " = " + format(micros / l1Micros, digits: 1) + "× an L1 request's" : "")
        }
        let states = try database().query("SELECT state, count(*)::bigint FROM jobs WHERE app = \(app) GROUP BY state ORDER BY state")
            .map { "\(try $0.decode(0, as: String.self)) \(format(Double(try $0.decode(1, as: Int.self))))" }.joined(separator: ", ")
        let errors = try database().query("""
            SELECT last_error || ' (' || count(*) || ')' FROM job_rows WHERE app = \(app) AND last_error IS NOT NULL
             GROUP BY last_error ORDER BY count(*) DESC LIMIT 3
            """).map { try $0.decode(0, as: String.self) }
        let metrics = (try? BenchConnection(host: host, port: port).request("GET", "/metrics").text) ?? ""
        let apnsSent = Self.attempts(metrics, platform: "apns", outcome: "sent")
        let webSent = Self.attempts(metrics, platform: "webpush", outcome: "sent")
        let otherOutcomes = Self.otherOutcomes(metrics)

        let met = jobsPerSecond >= 10_000 && l1 > 0 && jobsPerSecond / l1 >= 0.25 && mixed.acked == expected
        add("W8 direct delivery: \(format(Double(expected))) jobs, ½ APNs (HTTP/2) ½ Web Push, concurrency \(concurrency)",
            format(jobsPerSecond) + " jobs/s", nil, goal: "≥ 10,000 jobs/s and ≥ 0.25 of L1: " + ofL1(jobsPerSecond), met: met)
        let apnsMicros = apnsOnly.heraldMicros / Double(phaseJobs), webMicros = webOnly.heraldMicros / Double(phaseJobs)
        let apnsRate = Double(phaseJobs) / apnsOnly.seconds, webRate = Double(phaseJobs) / webOnly.seconds
        add("W8 APNs only: \(format(Double(phaseJobs))) jobs", format(apnsRate) + " jobs/s", nil,
            goal: ofL1(apnsRate) + "; " + cpu(apnsMicros, "job"))
        add("W8 Web Push only: \(format(Double(phaseJobs))) jobs", format(webRate) + " jobs/s", nil,
            goal: ofL1(webRate) + "; " + cpu(webMicros, "message"))
        notes.append("W8: \(format(Double(mixed.acked))) of \(format(Double(expected))) acked \(format(mixed.seconds, digits: 2)) s after the first post "
                     + "(posting the \(messages) messages took \(format(mixed.postSeconds, digits: 2)) s; in the phases APNs only and Web Push only "
                     + "\(format(apnsOnly.postSeconds, digits: 2)) s and \(format(webOnly.postSeconds, digits: 2)) s, of \(format(apnsOnly.seconds, digits: 2)) s "
                     + "and \(format(webOnly.seconds, digits: 2)) s); the app's jobs by state: \(states); "
                     + "pushes sent: APNs \(format(apnsSent)), Web Push \(format(webSent)) (the phases' included); other outcomes: \(otherOutcomes)"
                     + (errors.isEmpty ? "." : "; the retried jobs' last errors: " + errors.joined(separator: "; ") + "."))
        notes.append("W8 CPU over the mixed run: Herald \(format(mixed.heraldMicros / 1e6, digits: 2)) s "
                     + "(\(format(mixed.heraldMicros / Double(max(1, mixed.acked)), digits: 1)) µs/job), the two nghttpd "
                     + "\(format(mixed.receiverMicros / 1e6, digits: 2)) s, the machine \(format(mixed.machineBusy, digits: 2)) cores busy on average; Herald's busiest thread ran "
                     + "\(format(mixed.busiestThread * 100))% of the time (APNs only: \(format(apnsOnly.busiestThread * 100))%, "
                     + "Web Push only: \(format(webOnly.busiestThread * 100))%).")
        notes.append("W8 CPU per encrypted Web Push message: \(format(webMicros, digits: 1)) µs, measured as Herald's process CPU "
                     + "(/proc/<pid>/stat, every thread: ingest, fan-out, claim, encryption, VAPID, send, ack) over \(format(Double(phaseJobs))) "
                     + "Web Push jobs ÷ jobs; the same jobs to APNs cost \(format(apnsMicros, digits: 1)) µs, so Web Push adds "
                     + "\(format(webMicros - apnsMicros, digits: 1)) µs" + (l1Micros > 0 ? "; an L1 request's CPU is \(format(l1Micros, digits: 1)) µs (2 cores ÷ L1)." : "."))
    }

    private func skipW8(_ reason: String) {
        say("    " + reason)
        notes.append(reason)
    }

    /// The app's acked jobs, cheaply: the acked marks of its blocks and its acked row jobs.
    static func acked(app: String) -> SQL {
        """
        SELECT (SELECT coalesce(sum(bit_count(k.acked & ~k.moved)), 0) FROM job_blocks b JOIN job_block_marks k ON k.app = b.app AND k.block = b.id
                 WHERE b.app = \(app))::bigint
             + (SELECT count(*) FROM job_rows WHERE app = \(app) AND state = 'acked')
        """
    }

    /// The direct pushes' series of `herald_delivery_attempts_total` other than `sent`, as
    /// `platform outcome status: count` (none: "none").
    static func otherOutcomes(_ metrics: String) -> String {
        var found: [String] = []
        for line in metrics.split(separator: "\n") where line.hasPrefix("herald_delivery_attempts_total{") && line.contains("platform=")
            && !line.contains("outcome=\"sent\"") {
            found.append(String(line.dropFirst("herald_delivery_attempts_total".count)).replacing("\"", with: ""))
        }
        return found.isEmpty ? "none" : found.joined(separator: ", ")
    }

    /// The sum of the `herald_delivery_attempts_total` series of a platform and outcome.
    static func attempts(_ metrics: String, platform: String, outcome: String) -> Double {
        var total = 0.0
        for line in metrics.split(separator: "\n") where line.hasPrefix("herald_delivery_attempts_total{")
            && line.contains("platform=\"\(platform)\"") && line.contains("outcome=\"\(outcome)\"") {
            total += Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return total
    }
}

/// One timed part of W8: from before its first post to all its jobs acked.
struct Phase {
    struct Sample {
        let at: UInt64
        let herald: Double
        /// Herald's threads' CPU seconds, by thread id.
        let threads: [Int: Double]
        let receivers: Double
        let machine: (busy: Double, total: Double)

        init(pid: pid_t, receivers: [pid_t]) {
            at = now()
            herald = processCPUSeconds(pid)
            threads = threadCPUSeconds(pid)
            self.receivers = receivers.map(processCPUSeconds).reduce(0, +)
            machine = machineCPUTicks()
        }
    }

    let before: Sample
    let after: Sample
    let ingestedAt: UInt64
    let acked: Int

    var seconds: Double { Double(after.at - before.at) / 1e9 }
    var postSeconds: Double { Double(ingestedAt - before.at) / 1e9 }
    var heraldMicros: Double { (after.herald - before.herald) * 1e6 }
    var receiverMicros: Double { (after.receivers - before.receivers) * 1e6 }
    /// The share of the phase's wall time that Herald's busiest thread ran (1: always).
    var busiestThread: Double {
        let busiest = after.threads.map { $0.value - (before.threads[$0.key] ?? 0) }.max() ?? 0
        return seconds > 0 ? busiest / seconds : 0
    }
    /// Cores busy on average (of all the machine's).
    var machineBusy: Double {
        let total = after.machine.total - before.machine.total
        return total > 0 ? (after.machine.busy - before.machine.busy) / total * Double(sysconf(Int32(_SC_NPROCESSORS_ONLN))) : 0
    }
}

/// A process's CPU time so far (user + system, every thread), in seconds.
func processCPUSeconds(_ pid: pid_t) -> Double { cpuSeconds(statPath: "/proc/\(pid)/stat") }

/// User + system seconds from a proc(5) `stat` file (a process's or a thread's).
func cpuSeconds(statPath: String) -> Double {
    guard let text = try? readFile(statPath), let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // after the name: state is field 3 of proc(5), utime 14, stime 15
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Each thread's CPU time so far (user + system), in seconds, by thread id.
func threadCPUSeconds(_ pid: pid_t) -> [Int: Double] {
    guard let directory = opendir("/proc/\(pid)/task") else { return [:] }
    defer { closedir(directory) }
    var threads: [Int: Double] = [:]
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        guard let tid = Int(name) else { continue }
        threads[tid] = cpuSeconds(statPath: "/proc/\(pid)/task/\(tid)/stat")
    }
    return threads
}

/// The machine's CPU ticks so far: busy (all but idle and iowait) and in total.
func machineCPUTicks() -> (busy: Double, total: Double) {
    guard let text = try? readFile("/proc/stat"), let line = text.split(separator: "\n").first, line.hasPrefix("cpu ") else { return (0, 0) }
    let values = line.split(separator: " ").dropFirst().prefix(8).compactMap { Double($0) }
    guard values.count == 8 else { return (0, 0) }
    let total = values.reduce(0, +)
    return (total - values[3] - values[4], total)
}

func writeFile(_ path: String, _ text: String) throws {
    guard let file = fopen(path, "w") else { throw BenchError("cannot write \(path)") }
    defer { fclose(file) }
    fputs(text, file)
}
