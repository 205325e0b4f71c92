import Glibc
import Synchronization

/// The peer's scenarios (S1, S2) and the soak: one event per request, as a chat server's bus
/// posts them, measured the way the Synapse comparison in issue 11 was.
extension Bench {
    struct Thread1 {
        let group: String
        let members: [String]
        let parent: String
    }

    /// A group of `members` members ("<prefix>u0" …), a thread started by the first, and an
    /// explicit PUT subscription of every member, all before any timed window.
    static func prepareThread(host: String, port: Int, keys: [String: String], prefix: String, members count: Int, base: Int64,
                              subscribe: Bool) throws -> Thread1 {
        let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
        let group = prefix + "g"
        let members = (0..<count).map { "\(prefix)u\($0)" }
        let put = try connection.request("PUT", "/v1/groups/\(group)/members", token: keys["server"],
                                         json: "{\"members\":[" + members.map { "\"\($0)\"" }.joined(separator: ",") + "]}")
        guard put.status == 200 else { throw BenchError("members: \(put.status) \(put.text)") }
        let parent = prefix + "p"
        let event = Self.groupMessage(event: "e-" + parent, id: parent, sender: members[0], group: group, parent: nil, at: base, mention: nil)
        let posted = try connection.request("POST", "/v1/events", token: keys["ingest"], contentType: "application/cloudevents+json",
                                            body: Array(event.utf8))
        guard posted.status == 200 else { throw BenchError("parent: \(posted.status) \(posted.text)") }
        if subscribe {
            for uid in members {
                let reply = try connection.request("PUT", "/v1/users/\(uid)/threads/\(parent)/subscription", token: keys["server"], json: "{}")
                guard reply.status == 200 else { throw BenchError("subscribe: \(reply.status) \(reply.text)") }
            }
        }
        _ = try setLevels(connection, keys: keys, group: group, members: members)
        return Thread1(group: group, members: members, parent: parent)
    }

    /// SPEC §18: every tenth member (the first, the eleventh, …) sets the group's level to `all`,
    /// so routing reads levels without changing who is notified (`all` is what the bench's
    /// preferences already say, in S1 and S2). Returns how many were set: a Herald without
    /// levels answers 404 and sets none, which is how a run before them is paired with one after.
    @discardableResult
    static func setLevels(_ connection: BenchConnection, keys: [String: String], group: String, members: [String]) throws -> Int {
        var set = 0
        for uid in stride(from: 0, to: members.count, by: 10).map({ members[$0] }) {
            let reply = try connection.request("PUT", "/v1/users/\(uid)/conversations/group_\(group)/level", token: keys["server"],
                                               json: #"{"level":"all"}"#)
            if reply.status == 200 { set += 1 }
        }
        return set
    }

    static func groupMessage(event: String, id: String, sender: String, group: String, parent: String?, at: Int64, mention: String?) -> String {
        var data = "\"id\":\"\(id)\",\"sender\":\"\(sender)\",\"receiverType\":\"group\",\"receiver\":\"\(group)\","
        if let parent { data += "\"parentId\":\"\(parent)\"," }
        data += "\"sentAt\":\(at),\"text\":\"message \(id) of the bench, long enough to look like chat\","
        data += "\"mentions\":[\(mention.map { "\"\($0)\"" } ?? "")],\"mentionsAll\":false"
        return "{\"specversion\":\"1.0\",\"id\":\"\(event)\",\"source\":\"bench\",\"type\":\"message.created\",\"data\":{\(data)}}"
    }

    /// S1/S2: `replies` replies from one sender in one thread of a `members`-member group where
    /// every member subscribed explicitly; every 5th mentions a member; one event per request,
    /// 8 in flight. Replies/s = accepted ÷ time from the start to the last 200.
    ///
    /// With `digestSeconds` (S2d, SPEC §17), every member has that digest window (the app's
    /// default): the first reply pushes to everyone and opens their windows, the later ones are
    /// held (the mentions still push), and each member's digest is committed at the window's end.
    /// Returns the replies per second.
    @discardableResult
    func peerScenario(_ name: String, members: Int, replies: Int, goal: Double, digestSeconds: Int? = nil,
                      goalText: String? = nil) throws -> Double {
        let app = "bench-\(name.lowercased())-\(runID)"
        let keys = try makeApp(app)
        let base = Int64(time(nil)) * 1000 - 600_000
        if let digestSeconds {
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let reply = try connection.request("PATCH", "/v1/settings/notifications", token: keys["server"],
                                               json: #"{"replyDigestSeconds":{"value":\#(digestSeconds),"userCanOverride":true}}"#)
            guard reply.status == 200 else { throw BenchError("digest window: \(reply.status) \(reply.text)") }
        }
        say("\(name) setup: a \(members)-member group, a thread, \(members) explicit subscriptions …")
        let thread = try Self.prepareThread(host: host, port: port, keys: keys, prefix: name.lowercased(), members: members, base: base, subscribe: true)
        let sender = thread.members[1]
        let host = self.host, port = self.port
        let tickets = Ticket(limit: replies)
        let retries = Counter()
        say("\(name): \(replies) replies, one per request, 8 in flight …")
        let result = runLoad(workers: 8) { _, log in
            guard let n = tickets.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            let mention = n % 5 == 4 ? thread.members[2 + n / 5 % (members - 2)] : nil
            let body = Self.groupMessage(event: "\(name)-r\(n)", id: "\(name)-m\(n)", sender: sender, group: thread.group,
                                         parent: thread.parent, at: base + 1000 + Int64(n), mention: mention)
            let started = now()
            var retried = 0
            let ok = try Self.post(connection, key: keys["ingest"], contentType: "application/cloudevents+json",
                                   body: Array(body.utf8), expect: 1, retries: &retried)
            retries.add(retried)
            log.record(started, ok: ok, error: "a reply was not accepted")
            return true
        }
        // Jobs of a small group commit with the request; this waits in case they did not. With
        // digests: the first reply's jobs and one per mention; the rest are held.
        let expected = digestSeconds == nil ? replies * (members - 1) : (members - 1) + (0..<replies).filter { $0 % 5 == 4 && $0 > 0 }.count
        let waitStarted = now()
        var jobs = 0
        while true {
            jobs = try count("""
                SELECT count(*) FROM jobs
                 WHERE app = \(app) AND message_id = ANY (ARRAY(SELECT id FROM messages WHERE app = \(app) AND parent_id = \(thread.parent)))
                """)
            if jobs >= expected || now() - waitStarted > 30_000_000_000 { break }
            usleep(10_000)
        }
        let allJobs = result.seconds + Double(now() - waitStarted) / 1_000_000_000
        let p50 = result.percentile(0.5), p99 = result.percentile(0.99)
        add("\(name) peer: \(members)-member thread, 1 reply per request, 8 in flight", format(result.perSecond) + " replies/s", result,
            goal: goalText ?? "≥ \(format(goal)) replies/s, p99 ≤ 2× p50", met: result.perSecond >= goal && p99 <= 2 * p50 && result.errors == 0)
        if digestSeconds != nil { try digestsCommitted(app: app, name: name, windows: members - 1) }
        notes.append("\(name): \(result.operations) replies accepted, \(result.errors) failed, \(retries.value) retries after 429/503; "
                     + "\(format(Double(jobs))) of \(format(Double(expected))) jobs committed \(format(allJobs, digits: 2)) s after the start "
                     + "(\(format(Double(jobs) / result.seconds)) jobs/s).")
        return result.perSecond
    }

    /// S2d: waits for the windows' end, then for their digests; notes how long after the end the
    /// last one was committed (SPEC §17: within 2 s), and that every window got one.
    func digestsCommitted(app: String, name: String, windows: Int) throws {
        let end = try count("SELECT max(ends_at) FROM digest_windows WHERE app = \(app)")
        let wait = Double(end) / 1000 - Double(time(nil))
        say("\(name): waiting \(format(max(0, wait), digits: 0)) s for the digest windows to end …")
        var digests = 0
        var seen = 0.0   // the wall clock when every digest was visible, that is committed
        let waited = now()
        while now() - waited < UInt64(max(0, wait) + 60) * 1_000_000_000 {
            digests = try count("SELECT count(*) FROM job_rows WHERE app = \(app) AND kind = 'digest'")
            seen = wallSeconds()
            if digests >= windows { break }
            usleep(50_000)
        }
        // Not the rows' created_at: that is the closing transaction's start, not its commit.
        let closed = try count("SELECT count(*) FROM digest_windows WHERE app = \(app) AND closed_at IS NOT NULL")
        let lag = seen - Double(end) / 1000
        add("\(name) digests: the last of \(windows) committed after the windows' end", format(lag, digits: 2) + " s", nil,
            goal: "≤ 2 s, one per window", met: lag <= 2 && digests == windows && closed == windows)
        notes.append("\(name): \(digests) digest jobs for \(windows) windows (\(closed) closed); all visible (committed) \(format(lag, digits: 2)) s after the last window's end (polled every 50 ms).")
    }

    /// The soak: S1-shaped replies (one per request, 8 in flight, every 5th a mention) spread over
    /// many 50-member threads whose members all subscribed, while 4 workers claim and ack, for
    /// `seconds`. Reports the reply rate of the first and the last minute, the queue depth and the
    /// table sizes at the end.
    func soak(seconds: Double) throws {
        let app = "bench-soak-\(runID)"
        let keys = try makeApp(app)
        let threads = options.quick ? 20 : 100
        let base = Int64(time(nil)) * 1000 - 3_600_000
        say("soak setup: \(threads) threads in 50-member groups, every member subscribed …")
        let made = Mutex<[Thread1]>([])
        let setupTickets = Ticket(limit: threads)
        let host = self.host, port = self.port
        let setup = runLoad(workers: 4) { _, _ in
            guard let t = setupTickets.take() else { return false }
            let thread = try Self.prepareThread(host: host, port: port, keys: keys, prefix: "soak\(t)", members: 50, base: base, subscribe: true)
            made.withLock { $0.append(thread) }
            return true
        }
        guard setup.errors == 0 else { throw BenchError("soak setup failed") }
        let all = made.withLock { $0 }
        let minute = 60.0
        let buckets = Mutex<[Int]>(Array(repeating: 0, count: Int(seconds / minute) + 2))
        let started = now()
        let stop = Atomic<Bool>(false)
        let claimed = Counter()
        let workerResult = Mutex<LoadResult?>(nil)
        let workerThread = Thread {
            let result = runLoad(workers: 4) { _, log in
                if stop.load(ordering: .relaxed) { return false }
                let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
                let begun = now()
                let reply = try connection.request("POST", "/v1/jobs/claim", token: keys["worker"], json: #"{"max":100,"leaseSeconds":60}"#)
                guard reply.status == 200 else { throw BenchError("claim: \(reply.status)") }
                let handles = Self.jobHandles(reply.body)
                if handles.isEmpty {
                    usleep(50_000)
                    return true
                }
                let ack = "{\"jobs\":[" + handles.map { "{\"id\":\"\($0.id)\",\"attempt\":\($0.attempt)}" }.joined(separator: ",") + "]}"
                let acked = try connection.request("POST", "/v1/jobs/ack", token: keys["worker"], json: ack)
                log.record(begun, ok: acked.status == 200, count: handles.count, error: "ack \(acked.status)")
                claimed.add(handles.count)
                return true
            }
            workerResult.withLock { $0 = result }
        }
        workerThread.start()
        say("soak: \(format(seconds)) s of replies over \(all.count) threads, 4 workers claiming and acking …")
        let counter = Ticket(limit: Int.max)
        let result = runLoad(workers: 8, seconds: seconds) { _, log in
            guard let n = counter.take() else { return false }
            let connection = ThreadLocalConnections.get(host: host, port: port, count: 1)[0]
            var random = SplitMix(seed: UInt64(n) &+ 77)
            let thread = all[random.next(all.count)]
            let sender = thread.members[random.next(50)]
            let mention = n % 5 == 4 ? thread.members[random.next(50)] : nil
            let body = Self.groupMessage(event: "soak-r\(n)", id: "soak-m\(n)", sender: sender, group: thread.group,
                                         parent: thread.parent, at: base + 1000 + Int64(n), mention: mention)
            let begun = now()
            var retried = 0
            let ok = try Self.post(connection, key: keys["ingest"], contentType: "application/cloudevents+json",
                                   body: Array(body.utf8), expect: 1, retries: &retried)
            log.record(begun, ok: ok, error: "a reply was not accepted")
            if ok {
                let index = Int(Double(now() - started) / 1_000_000_000 / minute)
                buckets.withLock { if index < $0.count { $0[index] += 1 } }
            }
            return true
        }
        stop.store(true, ordering: .relaxed)
        while workerResult.withLock({ $0 == nil }) { usleep(20_000) }
        let perMinute = buckets.withLock { $0 }
        let minutes = max(1, Int(seconds / minute))
        let first = Double(perMinute[0]) / minute
        let last = Double(perMinute[minutes - 1]) / minute
        let ready = try count("SELECT count(*) FROM jobs WHERE app = \(app) AND state = 'ready'")
        add("soak: first minute", format(first) + " replies/s", nil)
        add("soak: last minute", format(last) + " replies/s", nil,
            goal: "≥ 90% of the first (" + format(minutes > 1 ? last / max(first, 1) * 100 : 100) + "%)",
            met: minutes > 1 && last >= 0.9 * first && result.errors == 0)
        add("soak: whole run", format(result.perSecond) + " replies/s", result)
        let sizes = try database().query("""
            SELECT string_agg(relname || ' ' || pg_size_pretty(pg_total_relation_size(relid)), ', ' ORDER BY pg_total_relation_size(relid) DESC)
              FROM pg_stat_user_tables
             WHERE relname IN ('jobs', 'subscriptions', 'messages', 'message_versions', 'mentions', 'threads', 'events', 'group_members')
            """)[0].decode(0, as: String?.self) ?? ""
        notes.append("soak: \(format(Double(result.operations))) replies in \(format(result.seconds, digits: 1)) s "
                     + "(per minute: \(perMinute.prefix(minutes).map { format(Double($0) / minute) }.joined(separator: ", ")) replies/s), "
                     + "\(result.errors) failed; workers acked \(format(Double(claimed.value))) jobs; "
                     + "\(format(Double(ready))) jobs ready at the end. Tables: \(sizes).")
    }
}
