import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
@testable import HeraldTestSupport
import Testing

/// SPEC §10: `GET /metrics` in the Prometheus text format. A private server (same database) so
/// that the counters move only with this test's requests.
@Suite("Metrics", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct MetricsTests {
    typealias Exposition = PrometheusText.Exposition

    /// `/metrics` read by the strict reader (`PrometheusText`, unit-tested on its own).
    static func parse(_ text: String) throws -> Exposition { try PrometheusText.parse(text) }

    /// A server of its own on a database of its own, with an app: a server on the shared one
    /// would deliver (claim and ack) the jobs of other suites' webhook apps, and other suites'
    /// requests would move the counters these tests read.
    static func withServerOfItsOwn(prefix: String, _ body: (HeraldServer, HTTPClient, TestApp) throws -> Void) throws {
        let environment = try TestEnvironment.shared()
        try environment.withDatabaseOfItsOwn(prefix: prefix) { databaseURL in
            let server = try HeraldTestServer.start(try TestEnvironment.configuration(databaseURL: databaseURL))
            defer { server.shutdown() }
            let client = HTTPClient(port: server.port)
            try body(server, client, try environment.makeApp(prefix: prefix, client: client))
        }
    }

    @Test("the exposition parses, and requests, events and jobs move their counters by exactly what happened")
    func countersFollowTheWork() throws {
        try Self.withServerOfItsOwn(prefix: "metrics") { server, client, app in

            let before = try Self.parse(try client.get("/metrics").text)
            // 3 members; a thread start by alice notifies bob and carol; a duplicate and a rejected event.
            let past = nowMilliseconds() - 60_000
            let events = ["alice", "bob", "carol"].map { Events.member("j-\($0)", "member.joined", uid: $0, at: past - 1000) }
                + [Events.message("m-1", id: "m1", sender: "alice", at: past, text: "hello")]
            var response = try client.post("/v1/events", token: app.ingestKey, json: Events.json(events),
                                           headers: ["Content-Type": "application/cloudevents-batch+json"])
            #expect(response.status == 200, "\(response.text)")
            response = try client.post("/v1/events", token: app.ingestKey,
                                       json: Events.json([Events.message("m-1", id: "m1", sender: "alice", at: past, text: "hello"),
                                                          ["specversion": "1.0"]]),
                                       headers: ["Content-Type": "application/cloudevents-batch+json"])
            #expect(response.status == 200, "\(response.text)")
            let claimed = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 10}"#)
            let jobs = claimed.json["jobs"] as? [[String: Any]] ?? []
            #expect(jobs.count == 2)
            let first = try #require(jobs.first)
            let acked = try client.post("/v1/jobs/ack", token: app.workerKey,
                                        json: Events.json(["jobs": [["id": first["id"]!, "attempt": first["attempt"]!]]]))
            #expect(acked.json["acked"] as? Int == 1)
            let second = try #require(jobs.last)
            let failed = try client.post("/v1/jobs/fail", token: app.workerKey,
                                         json: Events.json(["jobs": [["id": second["id"]!, "attempt": second["attempt"]!, "retryable": false]]]))
            #expect(failed.json["dead"] as? Int == 1)
            _ = try client.get("/v1/nowhere")
            _ = try client.get("/v1/users/bob/threads") // no token: 401

            let metricsResponse = try client.get("/metrics")
            #expect(metricsResponse.status == 200)
            #expect(metricsResponse.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let after = try Self.parse(metricsResponse.text)

            func delta(_ series: String) -> Double { (after.value(series) ?? 0) - (before.value(series) ?? 0) }
            #expect(delta(#"herald_events_total{result="accepted"}"#) == 4)
            #expect(delta(#"herald_events_total{result="duplicate"}"#) == 1)
            #expect(delta(#"herald_events_total{result="rejected"}"#) == 1)
            #expect(delta("herald_jobs_produced_total") == 2)
            #expect(delta("herald_jobs_claimed_total") == 2)
            #expect(delta("herald_jobs_acked_total") == 1)
            #expect(delta(#"herald_jobs_failed_total{outcome="dead"}"#) == 1)
            #expect(delta(#"herald_jobs_failed_total{outcome="retry"}"#) == 0)
            #expect(delta(#"herald_http_requests_total{method="POST",route="/v1/events",status="200"}"#) == 2)
            #expect(delta(#"herald_http_requests_total{method="GET",route="unmatched",status="404"}"#) == 1)
            #expect(delta(#"herald_http_requests_total{method="GET",route="/v1/users/{uid}/threads",status="401"}"#) == 1)
            #expect(delta(#"herald_http_requests_total{method="GET",route="/metrics",status="200"}"#) == 1,
                    "the first scrape is counted once it is answered")
            #expect(delta(#"herald_http_request_duration_seconds_count{method="POST",route="/v1/events"}"#) == 2)
            #expect(after.types["herald_http_request_duration_seconds"] == "histogram")
            #expect(after.types["herald_jobs_queue_depth"] == "gauge")
            #expect(after.value("herald_database_up") == 1)
            #expect((after.value(#"herald_jobs_queue_depth{state="dead"}"#) ?? 0) >= 1)
            #expect(after.value("herald_jobs_oldest_ready_age_seconds") != nil)
            #expect(after.value(#"herald_db_pool_connections_max{pool="request"}"#) == Double(server.database.configuration.size))
            #expect(after.value(#"herald_db_pool_connections_max{pool="delivery"}"#) == Double(server.deliveryDatabase.configuration.size))
            #expect(after.value(#"herald_db_pool_connections_in_use{pool="request"}"#) != nil)
            #expect(after.value(#"herald_db_pool_waiting{pool="delivery"}"#) == 0)
            #expect(after.value(#"herald_long_polls_waiting{kind="feed"}"#) == 0)
            #expect(after.value(#"herald_long_polls_waiting{kind="claim"}"#) == 0)
            #expect(after.value("herald_long_polls_max") == Double(try TestEnvironment.configuration().maxLongPolls))
            #expect(after.value(#"herald_build_info{version="\#(CommandLineTool.version)"}"#) == 1)
            #expect((after.value("process_resident_memory_bytes") ?? 0) > 1_000_000)
            // No tenant or user identifiers, nor keys, in the labels.
            #expect(!metricsResponse.text.contains(app.id))
            #expect(!metricsResponse.text.contains("alice"))
            #expect(!metricsResponse.text.contains("hk_"))
        }
    }

    /// Issue 35: a round whose events are all new messages stores them in the round trip that takes
    /// its locks, then applies them and reads the routing inputs in a second, then writes the
    /// jobs and commits in a third. What it stored ahead is checked: a redelivery (every event
    /// seen before) is rolled back and answered as duplicates, the usual way.
    @Test("a round of new replies makes three round trips to PostgreSQL; its redelivery is answered as duplicates")
    func roundTripsOfARound() throws {
        try Self.withServerOfItsOwn(prefix: "trips") { _, client, app in
            let past = nowMilliseconds() - 60_000
            let setup = ["alice", "bob", "carol"].map { Events.member("j-\($0)", "member.joined", uid: $0, at: past - 1000) }
                + [Events.message("m-1", id: "m1", sender: "alice", at: past, text: "hello")]
            let response = try client.post("/v1/events", token: app.ingestKey, json: Events.json(setup),
                                           headers: ["Content-Type": "application/cloudevents-batch+json"])
            #expect(response.status == 200, "\(response.text)")
            let replies = Events.json([
                Events.message("r-1", id: "r1", sender: "bob", parent: "m1", at: past + 1, text: "one"),
                Events.message("r-2", id: "r2", sender: "carol", parent: "m1", at: past + 2, text: "two", mentions: ["alice"]),
                Events.message("r-3", id: "r3", sender: "bob", parent: "m1", at: past + 3, text: "three"),
            ])
            /// Posts the replies; the answer, and the rounds and round trips they moved.
            func post() throws -> (response: HTTPResult, rounds: Double, trips: Double) {
                let before = try Self.parse(try client.get("/metrics").text)
                let response = try client.post("/v1/events", token: app.ingestKey, json: replies,
                                                headers: ["Content-Type": "application/cloudevents-batch+json"])
                let after = try Self.parse(try client.get("/metrics").text)
                func change(_ series: String) -> Double { (after.value(series) ?? 0) - (before.value(series) ?? 0) }
                return (response, change("herald_ingest_rounds_total"), change("herald_ingest_round_trips_total"))
            }
            func thread() throws -> [String: Any]? {
                let inbox = try client.get("/v1/users/alice/threads", token: app.serverKey)
                return (inbox.json["data"] as? [[String: Any]])?.first
            }
            let fresh = try post()
            #expect(fresh.response.status == 200, "\(fresh.response.text)")
            #expect(fresh.response.json["accepted"] as? Int == 3)
            #expect(fresh.rounds == 1)
            #expect(fresh.trips == 3)
            // the replies are stored, counted and routed as by the usual way
            #expect(try thread()?["unreadReplyCount"] as? Int == 3)
            #expect(try thread()?["unreadMentionCount"] as? Int == 1)
            let again = try post()
            #expect(again.response.status == 200, "\(again.response.text)")
            #expect(again.response.json["duplicates"] as? Int == 3)
            #expect(again.rounds == 1)
            #expect(again.trips > 3, "stored ahead, found seen before, rolled back and run again")
            #expect(try thread()?["unreadReplyCount"] as? Int == 3)
        }
    }

    /// The metric names a file uses: `herald_…` and `process_…` words, a histogram's
    /// `_bucket`/`_sum`/`_count` counted as its family.
    static func metricNames(in text: String) throws -> Set<String> {
        let pattern = try Regex(#"\b(?:herald|process)_[a-z0-9_]*[a-z0-9]"#)
        return Set(text.matches(of: pattern).map { String(text[$0.range]) })
    }

    @Test("every metric the Grafana dashboard and the Prometheus rules name is in /metrics")
    func deployFilesNameRealMetrics() throws {
        let server = try HeraldTestServer.start(try TestEnvironment.configuration())
        defer { server.shutdown() }
        let exposition = try Self.parse(try HTTPClient(port: server.port).get("/metrics").text)
        var known: Set<String> = []
        for (family, type) in exposition.types {
            known.insert(family)
            if type == "histogram" { known.formUnion([family + "_bucket", family + "_sum", family + "_count"]) }
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        for file in ["deploy/grafana/herald.json", "deploy/prometheus/herald-rules.yml", "README.md", "deploy/README.md"] {
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            let names = try Self.metricNames(in: text)
            if !file.hasSuffix(".md") { #expect(names.count >= 5, "\(file) names metrics") }
            // The README names the alerts' and dashboard's files too: only metric-like words count.
            let unknown = names.subtracting(known).filter { !$0.hasPrefix("herald_rules") }
            #expect(unknown.sorted() == [], "\(file) names metrics that /metrics does not have")
        }
    }
}
