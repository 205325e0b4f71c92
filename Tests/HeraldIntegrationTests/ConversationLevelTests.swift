import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §18: conversation levels (all, mentions, nothing) and track-only threads, through the
/// HTTP API of a real server: the routes and their errors, what routing does with a level, a
/// tracked thread's pushes and inbox row, and the feed items of both.
@Suite("Conversation levels and track-only threads", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ConversationLevelTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws { environment = try TestEnvironment.shared() }

    /// The SPEC §3 error code of an answer.
    func code(_ result: HTTPResult) -> String? { (result.json["error"] as? [String: Any])?["code"] as? String }

    func put(_ app: TestApp, _ uid: String, _ conversation: String, _ body: String) throws -> HTTPResult {
        try client.send("PUT", "/v1/users/\(uid)/conversations/\(conversation)/level", token: app.serverKey,
                        headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    @Test("PUT answers the level, DELETE goes back to the preferences, the list is newest first; bad input and outsiders are refused")
    func routes() throws {
        let app = try environment.makeApp(prefix: "levels")
        #expect(try app.setMembers("g1", ["alice", "bob"], client: client).status == 200)
        let set = try put(app, "alice", "group_g1", #"{"level": "mentions"}"#)
        #expect(set.status == 200, "\(set.text)")
        #expect(set.json["conversationId"] as? String == "group_g1" && set.json["level"] as? String == "mentions")
        let first = try #require(set.json["updatedAt"] as? Int)
        // the same level again changes nothing, not even its time
        #expect(try put(app, "alice", "group_g1", #"{"level": "mentions"}"#).json["updatedAt"] as? Int == first)
        Thread.sleep(forTimeInterval: 0.01)
        // one-on-one: either user, whichever side their uid sorts to
        #expect(try put(app, "alice", "alice_user_zed", #"{"level": "nothing"}"#).status == 200)
        #expect(try put(app, "zed", "alice_user_zed", #"{"level": "all"}"#).status == 200)

        let bad = try put(app, "alice", "group_g1", #"{"level": "loud"}"#)
        #expect(bad.status == 400 && code(bad) == "ERR_INVALID_PREFERENCE", "\(bad.text)")
        #expect(try put(app, "alice", "group_g1", #"{}"#).status == 400)
        let malformed = try put(app, "alice", "g1", #"{"level": "all"}"#)
        #expect(malformed.status == 400 && (malformed.json["error"] as? [String: Any]).flatMap { ($0["params"] as? [String: Any])?["field"] as? String } == "conversationId",
                "not SPEC §1's form: \(malformed.text)")
        for (uid, conversation) in [("carol", "group_g1"), ("carol", "alice_user_zed"), ("alice", "group_nowhere"), ("alice", "bob_user_zed")] {
            let refused = try put(app, uid, conversation, #"{"level": "all"}"#)
            #expect(refused.status == 403 && code(refused) == "ERR_MESSAGE_NO_ACCESS", "\(uid) \(conversation): \(refused.text)")
        }

        // newest change first, paged
        let page = try client.get("/v1/users/alice/conversation-levels?limit=1", token: app.serverKey).json
        #expect((page["data"] as? [[String: Any]])?.map { $0["conversationId"] as? String } == ["alice_user_zed"])
        let next = try #require((page["meta"] as? [String: Any])?["next"] as? String)
        let rest = try client.get("/v1/users/alice/conversation-levels?limit=1&cursor=\(next)", token: app.serverKey).json
        #expect((rest["data"] as? [[String: Any]])?.map { $0["level"] as? String } == ["mentions"])
        #expect((rest["meta"] as? [String: Any])?["hasMore"] as? Bool == false)

        #expect(try client.delete("/v1/users/alice/conversations/group_g1/level", token: app.serverKey).status == 204)
        let again = try client.delete("/v1/users/alice/conversations/group_g1/level", token: app.serverKey)
        #expect(again.status == 404 && code(again) == "ERR_NOT_FOUND", "\(again.text)")
        let left = try client.get("/v1/users/alice/conversation-levels", token: app.serverKey).json["data"] as? [[String: Any]]
        #expect(left?.map { $0["conversationId"] as? String } == ["alice_user_zed"])
    }

    @Test("a level replaces messages, replies and quotedReplies, over userCanOverride false; skips say CONVERSATION_LEVEL")
    func routing() throws {
        let app = try environment.makeApp(prefix: "levelroute")
        try app.patch("/v1/settings/notifications", #"""
            {"groupPreferences": {"messages": {"value": "DONT_SUBSCRIBE", "userCanOverride": false}}}
            """#, client: client)
        #expect(try app.setMembers("g1", ["a", "b", "c", "d", "e"], client: client).status == 200)
        for (uid, level) in [("b", "nothing"), ("c", "mentions"), ("d", "all")] {
            #expect(try put(app, uid, "group_g1", #"{"level": "\#(level)"}"#).status == 200)
        }
        let now = nowMilliseconds()
        try app.ingest([Events.message("l1", id: "m1", sender: "a", at: now, text: "hi", mentions: ["b", "c"]),
                        Events.message("l2", id: "m2", sender: "a", at: now + 1, text: "plain")], client: client)
        let jobs = try app.claimAll(client: client)
        let got = Set(jobs.map { "\(($0["data"] as? [String: Any])?["messageId"] as? String ?? "")/\($0["recipient"] as? String ?? "")/\($0["reason"] as? String ?? "")" })
        #expect(got == ["m1/c/mention", "m1/d/allMessages", "m2/d/allMessages"], "\(got)")
        func explain(_ uid: String, _ message: String) throws -> [String: Any] {
            try client.get("/v1/users/\(uid)/messages/\(message)/routing", token: app.serverKey).json
        }
        for (uid, message) in [("b", "m1"), ("c", "m2")] {
            let why = try explain(uid, message)
            #expect(why["notified"] as? Bool == false && why["reason"] as? String == "CONVERSATION_LEVEL", "\(uid) \(message): \(why)")
            #expect((why["steps"] as? [String] ?? []).contains { $0.hasPrefix("conversation level is") }, "\(why)")
        }
        #expect(try explain("e", "m2")["reason"] as? String == "MESSAGES_PREFERENCE", "no level: the app's preference")
    }

    @Test("a tracked thread stays in the inbox with its counts and pushes only mentions; the level is on answers, rows and feed items")
    func trackOnly() throws {
        let app = try environment.makeApp(prefix: "track")
        #expect(try app.setMembers("g1", ["a", "t"], client: client).status == 200)
        let now = nowMilliseconds()
        try app.ingest([Events.message("t0", id: "root", sender: "a", at: now, text: "root")], client: client)
        _ = try app.claimAll(client: client)
        let cursor = try #require((try client.get("/v1/users/t/changes", token: app.serverKey).json["meta"] as? [String: Any])?["next"] as? String)
        let path = "/v1/users/t/threads/root/subscription"
        let tracked = try client.send("PUT", path, token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"level": "track"}"#.utf8))
        #expect(tracked.status == 200 && tracked.json["level"] as? String == "track" && tracked.json["subscribed"] as? Bool == true,
                "\(tracked.text)")
        let badLevel = try client.send("PUT", path, token: app.serverKey, headers: ["Content-Type": "application/json"],
                                       body: Array(#"{"level": "loud"}"#.utf8))
        #expect(badLevel.status == 400 && code(badLevel) == "ERR_INVALID_PREFERENCE")
        // a PUT without a body keeps the level
        #expect(try client.send("PUT", path, token: app.serverKey).json["level"] as? String == "track")

        try app.ingest([Events.message("t1", id: "r1", sender: "a", parent: "root", at: now + 1, text: "quiet"),
                        Events.message("t2", id: "r2", sender: "a", parent: "root", at: now + 2, text: "you", mentions: ["t"]),
                        Events.message("t3", id: "r3", sender: "a", parent: "root", at: now + 3, text: "all", mentionsAll: true)],
                       client: client)
        let jobs = try app.claimAll(client: client).filter { $0["recipient"] as? String == "t" }
        #expect(Set(jobs.compactMap { ($0["data"] as? [String: Any])?["messageId"] as? String }) == ["r2", "r3"], "\(jobs)")
        let why = try client.get("/v1/users/t/messages/r1/routing", token: app.serverKey).json
        #expect(why["reason"] as? String == "TRACK_ONLY", "\(why)")
        let inbox = try client.get("/v1/users/t/threads", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        #expect(inbox.count == 1 && inbox.first?["level"] as? String == "track", "\(inbox)")
        #expect(inbox.first?["unreadReplyCount"] as? Int == 3 && inbox.first?["unreadMentionCount"] as? Int == 2, "\(inbox)")

        // an unsubscribe ends the level: subscribing again starts at notify
        #expect(try client.send("DELETE", path, token: app.serverKey).json["level"] as? String == "notify")
        #expect(try client.send("PUT", path, token: app.serverKey).json["level"] as? String == "notify")

        // the feed: the subscription items carry the level, a conversation level is an item of its own
        #expect(try put(app, "t", "group_g1", #"{"level": "mentions"}"#).status == 200)
        #expect(try client.delete("/v1/users/t/conversations/group_g1/level", token: app.serverKey).status == 204)
        let items = try client.get("/v1/users/t/changes?cursor=\(cursor)&limit=100", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        let levels = items.filter { $0["type"] as? String == "subscription" }.map { $0["level"] as? String ?? "?" }
        #expect(levels.first == "track" && levels.last == "notify", "\(items)")
        let conversation = items.filter { $0["type"] as? String == "conversationLevel" }
        #expect(conversation.map { $0["conversationId"] as? String } == ["group_g1", "group_g1"], "\(items)")
        #expect(conversation.first?["level"] as? String == "mentions" && conversation.last.map { $0["level"] is NSNull } == true, "\(items)")
    }

    @Test("a reply in a thread the user replied in: the level and the track decide there too")
    func replies() throws {
        let app = try environment.makeApp(prefix: "levelreply")
        let now = nowMilliseconds()
        try app.ingest(["a", "b", "c"].enumerated().map { Events.member("j\($0.offset)", "member.joined", uid: $0.element, at: now - 120_000) },
                       client: client)
        try app.ingest([Events.message("p", id: "p", sender: "b", at: now - 60_000, text: "plan?"),
                        Events.message("r", id: "r", sender: "a", parent: "p", at: now - 30_000, text: "hi", mentions: ["c"])], client: client)
        _ = try app.claimAll(client: client)
        #expect(try put(app, "a", "group_g1", #"{"level": "mentions"}"#).status == 200)
        #expect(try client.send("PUT", "/v1/users/c/threads/p/subscription", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                body: Array(#"{"level": "track"}"#.utf8)).json["level"] as? String == "track")
        try app.ingest([Events.message("r4", id: "r4", sender: "b", parent: "p", at: nowMilliseconds(), text: "shipping")], client: client)
        let jobs = try app.claimAll(client: client)
        #expect(jobs.isEmpty, "\(jobs.map { "\($0["recipient"] ?? "")/\($0["reason"] ?? "")" })")
    }

    @Test("a large group's background fan-out applies levels and tracks the same way")
    func largeGroup() throws {
        let app = try environment.makeApp(prefix: "levellarge")
        try app.patch("/v1/settings/notifications", #"{"largeGroupThreshold": 2}"#, client: client)
        #expect(try app.setMembers("g1", ["a", "b", "c", "d", "e"], client: client).status == 200)
        #expect(try put(app, "b", "group_g1", #"{"level": "nothing"}"#).status == 200)
        #expect(try put(app, "c", "group_g1", #"{"level": "mentions"}"#).status == 200)
        let now = nowMilliseconds()
        try app.ingest([Events.message("g0", id: "root", sender: "a", at: now, text: "root", mentions: ["b"])], client: client)
        var jobs: [[String: Any]] = []
        for _ in 0..<100 where jobs.count < 2 {
            jobs += try app.claimAll(client: client)
            if jobs.count < 2 { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(Set(jobs.compactMap { $0["recipient"] as? String }) == ["d", "e"], "b: nothing silences a mention; c: mentions")
        #expect(try client.send("PUT", "/v1/users/d/threads/root/subscription", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                body: Array(#"{"level": "track"}"#.utf8)).status == 200)
        try app.ingest([Events.message("g1r", id: "reply", sender: "a", parent: "root", at: nowMilliseconds(), text: "more")], client: client)
        var replies: [[String: Any]] = []
        for _ in 0..<100 where replies.isEmpty {
            replies += try app.claimAll(client: client)
            if replies.isEmpty { Thread.sleep(forTimeInterval: 0.1) }
        }
        Thread.sleep(forTimeInterval: 0.5)
        replies += try app.claimAll(client: client)
        #expect(Set(replies.compactMap { $0["recipient"] as? String }) == ["e"], "d tracks the thread; b and c are quiet")
    }
}
