import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §17: thread digests through the HTTP API of a real server — the preference, the first
/// reply pushed at once with the thread as its collapse id, the rest held (no job, explain says
/// DIGEST_PENDING), one `digest` job at the window's end that replaces it, and nothing when the
/// held replies were read or deleted or a quiet rule applies. Windows are 5 s, the least allowed.
@Suite("Thread digests", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct DigestTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws { environment = try TestEnvironment.shared() }

    func code(_ result: HTTPResult) -> String? { (result.json["error"] as? [String: Any])?["code"] as? String }

    func preferences(_ app: TestApp, _ uid: String, _ body: String) throws -> HTTPResult {
        try client.send("PATCH", "/v1/users/\(uid)/preferences", token: app.serverKey, headers: ["Content-Type": "application/json"],
                        body: Array(body.utf8))
    }

    func explain(_ app: TestApp, _ uid: String, _ message: String) throws -> [String: Any] {
        try client.get("/v1/users/\(uid)/messages/\(message)/routing", token: app.serverKey).json
    }

    /// Claims (and acks) until a job matching `match` arrives or `seconds` pass; every job claimed.
    func claim(_ app: TestApp, seconds: Double = 12, until match: ([String: Any]) -> Bool) throws -> [[String: Any]] {
        var all: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let jobs = try app.claimAll(client: client)
            all += jobs
            if jobs.contains(where: match) { break }
            Thread.sleep(forTimeInterval: 0.2)
        }
        return all
    }

    static func notification(_ job: [String: Any]) -> [String: Any] { job["notification"] as? [String: Any] ?? [:] }
    static func data(_ job: [String: Any]) -> [String: Any] { job["data"] as? [String: Any] ?? [:] }
    static func key(_ job: [String: Any]) -> String {
        "\(job["recipient"] as? String ?? "")/\(job["kind"] as? String ?? "")/\(data(job)["messageId"] as? String ?? "")"
    }

    @Test("replyDigestSeconds is 0 or 5–3600 whole seconds, per user or as the app's default")
    func preference() throws {
        let app = try environment.makeApp(prefix: "digestpref")
        for bad in ["4", "3601", "-1", "\"60\"", "2.5", "true"] {
            let refused = try preferences(app, "u1", #"{"replyDigestSeconds": \#(bad)}"#)
            #expect(refused.status == 400 && code(refused) == "ERR_INVALID_PREFERENCE", "\(bad): \(refused.text)")
        }
        for good in [0, 5, 3600] {
            let set = try preferences(app, "u1", #"{"replyDigestSeconds": \#(good)}"#)
            #expect(set.status == 200 && set.json["replyDigestSeconds"] as? Int == good, "\(set.text)")
        }
        // the app default, and a value users may not override
        try app.patch("/v1/settings/notifications", #"{"replyDigestSeconds": {"value": 60, "userCanOverride": false}}"#, client: client)
        let settings = try client.get("/v1/settings/notifications", token: app.serverKey).json
        #expect((settings["replyDigestSeconds"] as? [String: Any])?["value"] as? Int == 60)
        #expect(try client.get("/v1/users/u1/preferences", token: app.serverKey).json["replyDigestSeconds"] as? Int == 60)
        let bad = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                  body: Array(#"{"replyDigestSeconds": {"value": 1, "userCanOverride": true}}"#.utf8))
        #expect(bad.status == 400 && code(bad) == "ERR_INVALID_PREFERENCE", "\(bad.text)")
    }

    @Test("a burst: the first reply pushes at once under the thread's collapse id, the rest become one digest that replaces it")
    func burst() throws {
        let app = try environment.makeApp(prefix: "digestburst")
        #expect(try app.setMembers("g1", ["alice", "bob", "carol", "dave"], client: client).status == 200)
        #expect(try preferences(app, "bob", #"{"replyDigestSeconds": 5}"#).status == 200)
        let now = nowMilliseconds()
        try app.ingest([Events.message("p", id: "p", sender: "alice", at: now, text: "plans?")], client: client)
        _ = try app.claimAll(client: client)
        // bob follows the thread (the mention below would subscribe him too, from its own time on)
        #expect(try client.send("PUT", "/v1/users/bob/threads/p/subscription", token: app.serverKey).status == 200)
        // one reply per request, as a bus sends them; bob wrote none of them
        try app.ingest([Events.message("r1", id: "r1", sender: "alice", parent: "p", at: now + 1, text: "first")], client: client)
        try app.ingest([Events.message("r2", id: "r2", sender: "carol", parent: "p", at: now + 2, text: "second")], client: client)
        // a mention is never held and does not close the window
        try app.ingest([Events.message("r3", id: "r3", sender: "dave", parent: "p", at: now + 3, text: "hey bob", mentions: ["bob"])],
                       client: client)
        try app.ingest([Events.message("r4", id: "r4", sender: "alice", parent: "p", at: now + 4, text: "third")], client: client)
        try app.ingest([Events.message("r5", id: "r5", sender: "carol", parent: "p", at: now + 5, text: "fourth, the last")], client: client)

        let first = try app.claimAll(client: client)
        let bob = first.filter { $0["recipient"] as? String == "bob" }
        #expect(bob.map(Self.key) == ["bob/reply/r1", "bob/reply/r3"], "\(bob.map(Self.key))")
        let opening = try #require(bob.first)
        #expect(Self.notification(opening)["collapseId"] as? String == "p" && Self.notification(opening)["tag"] as? String == "p",
                "the push that opens the window collapses by thread: \(opening)")
        let mention = try #require(bob.last)
        #expect(mention["reason"] as? String == "mention" && Self.notification(mention)["collapseId"] as? String == "r3")
        // carol has no window: every reply, each under its own id
        let carol = first.filter { $0["recipient"] as? String == "carol" }
        #expect(carol.map(Self.key) == ["carol/reply/r1", "carol/reply/r3", "carol/reply/r4"])
        #expect(carol.allSatisfy { Self.notification($0)["collapseId"] as? String == Self.data($0)["messageId"] as? String })

        let pending = try explain(app, "bob", "r4")
        #expect(pending["notified"] as? Bool == false && pending["reason"] as? String == "DIGEST_PENDING", "\(pending)")
        #expect(try explain(app, "bob", "r1")["notified"] as? Bool == true)

        let later = try claim(app) { $0["kind"] as? String == "digest" }
        let digests = later.filter { $0["kind"] as? String == "digest" }
        try #require(digests.count == 1, "\(later.map(Self.key))")
        let digest = digests[0]
        let notification = Self.notification(digest), data = Self.data(digest)
        #expect(digest["recipient"] as? String == "bob" && digest["reason"] as? String == "subscribedThread")
        #expect(notification["collapseId"] as? String == "p" && notification["tag"] as? String == "p")
        #expect(notification["title"] as? String == "carol @ g1")
        #expect(notification["body"] as? String == "3 new replies: fourth, the last", "\(notification)")
        #expect(notification["badge"] as? Int == 1, "bob's one unread thread")
        #expect(data["count"] as? Int == 3 && data["messageIds"] as? [String] == ["r2", "r4", "r5"], "\(data)")
        #expect(data["senders"] as? [String] == ["carol", "alice"], "\(data)")
        #expect(data["messageId"] as? String == "r5" && data["parentMessageId"] as? String == "p")
        #expect((digest["event"] as? [String: Any])?["id"] as? String == "r5")
        // on time: not before the window's end, and within 2 s of it
        let opened = try #require(opening["createdAt"] as? Int), made = try #require(digest["createdAt"] as? Int)
        #expect(made - opened >= 5000 && made - opened <= 7500, "the digest came \(made - opened) ms after the window opened")

        // explain points at the digest for every reply it included
        for reply in ["r2", "r4", "r5"] {
            let answer = try explain(app, "bob", reply)
            #expect(answer["notified"] as? Bool == true && answer["jobId"] as? String == digest["id"] as? String, "\(reply): \(answer)")
        }
        // a reply after the window opens a new one: pushed at once again
        try app.ingest([Events.message("r6", id: "r6", sender: "alice", parent: "p", at: now + 6, text: "again")], client: client)
        let again = try app.claimAll(client: client).filter { $0["recipient"] as? String == "bob" }
        #expect(again.map(Self.key) == ["bob/reply/r6"], "\(again.map(Self.key))")

        // bob reads the thread on his phone: his other devices remove what they show under the
        // thread's id (the pushes that opened his windows, and the digest) with the replies' own
        #expect(try client.post("/v1/users/bob/threads/p/read", token: app.serverKey, json: #"{"deviceId": "phone"}"#).status == 200)
        let clear = try #require(try app.claimAll(client: client).first { $0["kind"] as? String == "clear" && $0["recipient"] as? String == "bob" })
        let ids = try #require(Self.data(clear)["collapseIds"] as? [String])
        #expect(ids.first == "p" && Set(ids) == ["p", "r6", "r3", "r1"], "\(ids)")
    }

    @Test("nothing is sent when the held replies were read or deleted, or a quiet rule now applies; explain says which")
    func nothingToSend() throws {
        let app = try environment.makeApp(prefix: "digestquiet")
        let members = ["alice", "reader", "muter", "dnd", "deleted"]
        #expect(try app.setMembers("g1", members, client: client).status == 200)
        try app.patch("/v1/settings/notifications", #"{"replyDigestSeconds": {"value": 5, "userCanOverride": true}}"#, client: client)
        let now = nowMilliseconds()
        try app.ingest([Events.message("p", id: "p", sender: "alice", at: now, text: "p"),
                        Events.message("q", id: "q", sender: "alice", at: now, text: "q")], client: client)
        // reads are kept for the threads a user follows (SPEC §6's read position)
        #expect(try client.send("PUT", "/v1/users/reader/threads/p/subscription", token: app.serverKey).status == 200)
        for (index, reply) in ["a1", "a2", "a3"].enumerated() {
            try app.ingest([Events.message(reply, id: reply, sender: "alice", parent: "p", at: now + 1 + Int64(index), text: reply)],
                           client: client)
        }
        try app.ingest([Events.message("b1", id: "b1", sender: "alice", parent: "q", at: now + 5, text: "b1")], client: client)
        try app.ingest([Events.message("b2", id: "b2", sender: "alice", parent: "q", at: now + 6, text: "b2")], client: client)
        let first = try app.claimAll(client: client)
        #expect(Set(first.filter { $0["kind"] as? String == "reply" }.map(Self.key))
                    == Set(members.dropFirst().flatMap { ["\($0)/reply/a1", "\($0)/reply/b1"] }), "\(first.map(Self.key))")

        // reader reads the thread; muter mutes the group; dnd turns do-not-disturb on; b2 is deleted
        #expect(try client.post("/v1/users/reader/threads/p/read", token: app.serverKey, json: "{}").status == 200)
        #expect(try client.send("PUT", "/v1/users/muter/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                body: Array(#"{"conversations": [{"id": "g1", "type": "group", "until": \#(now + 3_600_000)}]}"#.utf8)).status == 200)
        #expect(try preferences(app, "dnd", #"{"mutePreferences": {"dnd": "ENABLED"}}"#).status == 200)
        try app.ingest([Events.delete("d-b2", id: "b2", parent: "q", at: now + 7)], client: client)

        // everyone's windows end; only the p digests of those who neither read nor went quiet are sent
        let later = try claim(app, seconds: 9) { _ in false }
        let digests = later.filter { $0["kind"] as? String == "digest" }.map { "\($0["recipient"] as? String ?? "")/\(Self.data($0)["parentMessageId"] as? String ?? "")" }
        #expect(Set(digests) == ["deleted/p"], "\(digests)")
        #expect(try explain(app, "reader", "a2")["reason"] as? String == "READ")
        #expect(try explain(app, "muter", "a2")["reason"] as? String == "MUTE_PREFERENCE")
        #expect(try explain(app, "dnd", "a3")["reason"] as? String == "DND_PREFERENCE")
        #expect(try explain(app, "reader", "a2")["notified"] as? Bool == false)
    }

    @Test("windows closed together each digest their own replies: not the recipient's, not those that mention them, not those read")
    func windowsTogether() throws {
        let app = try environment.makeApp(prefix: "digestmany")
        #expect(try app.setMembers("g1", ["alice", "bob", "carol", "dave", "erin"], client: client).status == 200)
        try app.patch("/v1/settings/notifications", #"{"replyDigestSeconds": {"value": 5, "userCanOverride": true}}"#, client: client)
        let now = nowMilliseconds()
        try app.ingest([Events.message("p", id: "p", sender: "alice", at: now, text: "p")], client: client)
        // r1 opens the windows of bob, carol, dave and erin, r2 alice's; they end within a second
        try app.ingest([Events.message("r1", id: "r1", sender: "alice", parent: "p", at: now + 1, text: "r1")], client: client)
        try app.ingest([Events.message("r2", id: "r2", sender: "carol", parent: "p", at: now + 2, text: "r2")], client: client)
        try app.ingest([Events.message("r3", id: "r3", sender: "dave", parent: "p", at: now + 3, text: "r3 @erin", mentions: ["erin"])],
                       client: client)
        #expect(try client.post("/v1/users/dave/threads/p/read", token: app.serverKey, json: "{}").status == 200)
        try app.ingest([Events.message("r4", id: "r4", sender: "bob", parent: "p", at: now + 4, text: "r4")], client: client)
        let jobs = try claim(app) { _ in false }
        var digests: [String: [String]] = [:]
        for job in jobs where job["kind"] as? String == "digest" {
            let data = Self.data(job)
            digests[job["recipient"] as? String ?? "", default: []] += data["messageIds"] as? [String] ?? []
            #expect(data["count"] as? Int == (data["messageIds"] as? [String])?.count, "\(data)")
        }
        // alice's window opened with r2 (r1 was hers); bob's reply r4 read the thread for him, so
        // the r2 his window held was read; r3 mentioned erin (pushed, not held), and the mention
        // subscribed her with r3 and later unread (SPEC §6), so r2 is behind her read position
        #expect(digests == ["alice": ["r3", "r4"], "carol": ["r3", "r4"], "dave": ["r4"], "erin": ["r4"]], "\(digests)")
    }

    @Test("a large group (SPEC §8.3) holds and digests the same way")
    func largeGroup() throws {
        let members = (0..<12).map { "m\($0)" }
        let app = try environment.makeApp(prefix: "digestlarge")
        try app.patch("/v1/settings/notifications", #"""
            {"largeGroupThreshold": 3, "replyDigestSeconds": {"value": 5, "userCanOverride": true}}
            """#, client: client)
        #expect(try app.setMembers("g1", members, client: client).status == 200)
        let now = nowMilliseconds()
        try app.ingest([Events.message("p", id: "p", sender: "m0", at: now, text: "p")], client: client)
        try app.ingest([Events.message("r1", id: "r1", sender: "m0", parent: "p", at: now + 1, text: "r1")], client: client)
        // the background fan-out of r1 opens the windows; r2 and r3 come after it
        var replies: [[String: Any]] = []
        #expect(eventually(seconds: 15) {
            replies += ((try? app.claimAll(client: client)) ?? []).filter { $0["kind"] as? String == "reply" }
            return replies.count >= 11
        })
        #expect(replies.allSatisfy { Self.notification($0)["collapseId"] as? String == "p" })
        try app.ingest([Events.message("r2", id: "r2", sender: "m0", parent: "p", at: now + 2, text: "r2"),
                        Events.message("r3", id: "r3", sender: "m0", parent: "p", at: now + 3, text: "r3")], client: client)
        let jobs = try claim(app) { $0["kind"] as? String == "digest" }
        replies += jobs.filter { $0["kind"] as? String == "reply" }
        #expect(Set(replies.map { Self.data($0)["messageId"] as? String }) == ["r1"], "\(replies.map(Self.key))")
        #expect(replies.count == 11)
        var digests = jobs.filter { $0["kind"] as? String == "digest" }
        if digests.count < 11 { digests += try claim(app, seconds: 4) { _ in false }.filter { $0["kind"] as? String == "digest" } }
        #expect(digests.count == 11 && digests.allSatisfy { Self.data($0)["count"] as? Int == 2 }, "\(digests.map(Self.key))")
    }
}
