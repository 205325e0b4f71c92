import Glibc
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import HTTPServer
import Locking

/// W7: built-in webhook delivery. A receiver in this process (libmicrohttpd, answering 200)
/// gets 100,000 jobs: 100 messages in a group of 1,001 members, posted as fast as ingest takes
/// them while delivery runs. Jobs/s = jobs received ÷ time from the first post to the last
/// delivery; the latency of each is from its job's `createdAt` to its arrival.
extension Bench {
    func webhookDelivery() throws {
        let app = "bench-w7-\(runID)"
        let members = 1001, messages = options.quick ? 20 : 100
        let expected = (members - 1) * messages
        let keys = try makeApp(app)
        let connection = BenchConnection(host: host, port: port)
        let received = Lock(Received(capacity: expected))
        let receiver = HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threads: 4, maxConnections: 256)) { request in
            let arrived = currentTimeMilliseconds()
            let created = Self.createdAt(request.body)
            let id = request.headers["webhook-id"] ?? ""
            received.withLock { $0.record(id: id, latencyMs: created.map { arrived - $0 }, at: now()) }
            return Response(status: 200)
        }
        try receiver.start()
        defer { receiver.shutdown(drainTimeoutSeconds: 2) }
        say("W7 setup: a group of \(format(Double(members))) members, webhook delivery to 127.0.0.1:\(receiver.port) …")
        let list = (0..<members).map { "\"w\($0)\"" }.joined(separator: ",")
        let put = try connection.request("PUT", "/v1/groups/w7/members", token: keys["server"], json: "{\"members\":[\(list)]}")
        guard put.status == 200 else { throw BenchError("W7 group: \(put.status) \(put.text)") }
        let settings = """
            {"largeGroupThreshold": 100000, "delivery": {"mode": "webhook", "url": "http://127.0.0.1:\(receiver.port)/hook",
             "timeoutMs": 5000, "concurrency": 32}}
            """
        let patched = try connection.request("PATCH", "/v1/settings/notifications", token: keys["server"], json: settings)
        guard patched.status == 200 else { throw BenchError("W7 settings: \(patched.status) \(patched.text)") }
        usleep(300_000)   // the instance starts the app's deliverer
        say("W7: \(messages) messages → \(format(Double(expected))) jobs delivered by webhook …")
        let base = Int64(time(nil)) * 1000 - 60_000
        let started = now()
        for n in 0..<messages {
            let event = Self.groupMessage(event: "w7-\(n)", id: "w7m\(n)", sender: "w0", group: "w7", parent: nil, at: base + Int64(n), mention: nil)
            let reply = try connection.request("POST", "/v1/events", token: keys["ingest"], contentType: "application/cloudevents+json",
                                               body: Array(event.utf8))
            guard reply.status == 200 else { throw BenchError("W7 post: \(reply.status) \(reply.text)") }
        }
        let posted = now()
        let deadline = now() + 300 * 1_000_000_000
        while received.withLock({ $0.count }) < expected, now() < deadline { usleep(20_000) }
        let snapshot = received.withLock { $0 }
        let seconds = Double((snapshot.last ?? now()) - started) / 1e9
        var result = LoadResult()
        result.operations = snapshot.count
        result.seconds = seconds
        result.latencies = snapshot.latencies.map { UInt64(max(0, $0)) * 1_000_000 }
        let perSecond = Double(snapshot.count) / seconds
        let ratio = l1RequestsPerSecond > 0 ? ", " + format(perSecond / l1RequestsPerSecond, digits: 2) + " of L1" : ""
        add("W7 webhook delivery: \(format(Double(expected))) jobs, concurrency 32", format(perSecond) + " jobs/s", result,
            goal: "≥ 10,000 jobs/s" + ratio, met: perSecond >= 10_000 && snapshot.count == expected && snapshot.duplicates == 0)
        let acked = try count("SELECT count(*) FROM jobs WHERE app = \(app) AND state = 'acked'")
        notes.append("W7: \(format(Double(snapshot.count))) of \(format(Double(expected))) delivered (\(snapshot.duplicates) twice), "
                     + "\(format(Double(acked))) acked; ingest of the \(messages) messages took "
                     + "\(format(Double(posted - started) / 1e9, digits: 2)) s; p50/p99 are from job creation to arrival.")
    }

    /// A job body's top-level `"createdAt":<ms>` (the job object's own, which comes before `event`).
    static func createdAt(_ body: [UInt8]) -> Int64? {
        let key = Array("\"createdAt\":".utf8)
        guard body.count > key.count else { return nil }
        var index = 0
        while index + key.count < body.count {
            if body[index] == key[0], Array(body[index..<index + key.count]) == key {
                var value: Int64 = 0
                var position = index + key.count
                while position < body.count, body[position] >= 48, body[position] <= 57 {
                    value = value * 10 + Int64(body[position] - 48)
                    position += 1
                }
                return value
            }
            index += 1
        }
        return nil
    }
}

/// What the W7 receiver saw.
struct Received {
    var ids: Set<String>
    var latencies: [Int64] = []
    var duplicates = 0
    var last: UInt64?
    var count: Int { ids.count }

    init(capacity: Int) {
        ids = Set(minimumCapacity: capacity)
        latencies.reserveCapacity(capacity)
    }

    mutating func record(id: String, latencyMs: Int64?, at time: UInt64) {
        if !ids.insert(id).inserted { duplicates += 1 }
        if let latencyMs { latencies.append(latencyMs) }
        last = time
    }
}
