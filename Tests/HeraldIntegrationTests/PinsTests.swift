import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §12.1–12.2 over HTTP: pins, saves and conversation pins decided by their latest event in
/// any order of delivery (an unpin or unsave wins a tie), the three lists and the per-viewer lookup.
@Suite("Pins and saves", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PinsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    static func pin(_ eventID: String, _ message: String, by: String, group: String? = "g1", peer: String? = nil, at: Int64,
                    pinned: Bool = true) -> [String: Any] {
        var data: [String: Any] = ["messageId": message, "by": by, "at": at]
        Events.addConversation(to: &data, group: group, peer: peer)
        return Events.event(eventID, pinned ? "message.pinned" : "message.unpinned", data)
    }

    static func save(_ eventID: String, _ message: String, uid: String, at: Int64, saved: Bool = true) -> [String: Any] {
        Events.event(eventID, saved ? "message.saved" : "message.unsaved", ["messageId": message, "uid": uid, "at": at, "deviceId": "phone"])
    }

    static func conversationPin(_ eventID: String, uid: String, group: String? = "g1", peer: String? = nil, at: Int64,
                                pinned: Bool = true) -> [String: Any] {
        var data: [String: Any] = ["uid": uid, "at": at]
        Events.addConversation(to: &data, group: group, peer: peer)
        return Events.event(eventID, pinned ? "conversation.pinned" : "conversation.unpinned", data)
    }

    func chat() throws -> TestApp {
        let app = try environment.makeApp(prefix: "pins", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "plan"),
                        Events.message("e2", id: "m2", sender: "bob", parent: "m1", at: past + 10, text: "agreed"),
                        Events.message("e3", id: "m3", sender: "carol", at: past + 20, text: "lunch")], client: client)
        return app
    }

    func list(_ app: TestApp, _ path: String) throws -> (ids: [String], json: [String: Any]) {
        let response = try client.get(path, token: app.serverKey)
        #expect(response.status == 200, "\(path): \(response.text)")
        let data = response.json["data"] as? [[String: Any]] ?? []
        return (data.compactMap { ($0["messageId"] ?? $0["conversationId"]) as? String }, response.json)
    }

    func lookup(_ app: TestApp, _ uid: String, _ ids: [String]) throws -> [String: [String: Any]] {
        let response = try client.post("/v1/users/\(uid)/messages/lookup", token: app.serverKey, json: Events.json(["messageIds": ids]))
        #expect(response.status == 200, "\(response.text)")
        return response.json["data"] as? [String: [String: Any]] ?? [:]
    }

    @Test("a pin is decided by its latest event in any order; on a tie the unpin wins")
    func pinOrder() throws {
        let app = try chat()
        // the pin at t+20 arrives after an unpin at t+10: pinned
        try app.ingest([Self.pin("p2", "m1", by: "alice", at: past + 200)], client: client)
        try app.ingest([Self.pin("p1", "m1", by: "bob", at: past + 100, pinned: false)], client: client)
        var state = try lookup(app, "carol", ["m1"])["m1"]
        #expect(state?["pinnedAt"] as? Int64 == past + 200 && state?["pinnedBy"] as? String == "alice")
        // a pin and an unpin at the same time, either order: unpinned
        try app.ingest([Self.pin("p3", "m3", by: "bob", at: past + 300), Self.pin("p4", "m3", by: "bob", at: past + 300, pinned: false)],
                       client: client)
        try app.ingest([Self.pin("p5", "m2", by: "bob", at: past + 300, pinned: false)], client: client)
        try app.ingest([Self.pin("p6", "m2", by: "bob", at: past + 300)], client: client)
        state = try lookup(app, "carol", ["m3"])["m3"]
        #expect(state?["pinnedAt"] as? Int == 0 && state?["pinnedBy"] is NSNull)
        #expect(try lookup(app, "carol", ["m2"])["m2"]?["pinnedAt"] as? Int == 0)
        // two pins at the same time, either order: the greater actor in byte order
        try app.ingest([Self.pin("t1", "m3", by: "bob", at: past + 500)], client: client)
        try app.ingest([Self.pin("t2", "m3", by: "alice", at: past + 500)], client: client)
        try app.ingest([Self.pin("t3", "m2", by: "alice", at: past + 500), Self.pin("t4", "m2", by: "bob", at: past + 500)], client: client)
        #expect(try lookup(app, "carol", ["m3"])["m3"]?["pinnedBy"] as? String == "bob")
        #expect(try lookup(app, "carol", ["m2"])["m2"]?["pinnedBy"] as? String == "bob")
    }

    @Test("a conversation's pins: newest first, a reply with its parent, pages, deleted messages left out")
    func conversationPins() throws {
        let app = try chat()
        try app.ingest([Self.pin("p1", "m1", by: "alice", at: past + 100), Self.pin("p2", "m2", by: "bob", at: past + 200),
                        Self.pin("p3", "m3", by: "app_system", at: past + 300)], client: client)
        let all = try list(app, "/v1/conversations/group_g1/pins")
        #expect(all.ids == ["m3", "m2", "m1"])
        let items = all.json["data"] as? [[String: Any]] ?? []
        let reply = try #require(items.first { $0["messageId"] as? String == "m2" })
        #expect(reply["parentMessageId"] as? String == "m1" && reply["pinnedBy"] as? String == "bob" && reply["text"] as? String == "agreed")
        #expect((reply["parent"] as? [String: Any])?["text"] as? String == "plan")
        #expect(items.first?["pinnedBy"] as? String == "app_system" && items.first?["parent"] is NSNull)
        // pages of one
        let first = try list(app, "/v1/conversations/group_g1/pins?limit=1")
        let next = try #require((first.json["meta"] as? [String: Any])?["next"] as? String)
        #expect(first.ids == ["m3"] && (first.json["meta"] as? [String: Any])?["hasMore"] as? Bool == true)
        let second = try list(app, "/v1/conversations/group_g1/pins?limit=2&cursor=\(next)")
        #expect(second.ids == ["m2", "m1"] && (second.json["meta"] as? [String: Any])?["hasMore"] as? Bool == false)
        #expect(try client.get("/v1/conversations/group_g1/pins?cursor=garbage!", token: app.serverKey).status == 400)
        // deleting a message unpins it for everyone
        try app.ingest([Events.delete("d1", id: "m3", at: past + 400)], client: client)
        #expect(try list(app, "/v1/conversations/group_g1/pins").ids == ["m2", "m1"])
        #expect(try lookup(app, "alice", ["m3"])["m3"] == nil, "a deleted message is left out of the lookup")
        // an unknown conversation: empty; a conversation id may be longer than an id (a 125-character guid)
        #expect(try list(app, "/v1/conversations/group_nope/pins").ids.isEmpty)
        #expect(try list(app, "/v1/conversations/group_\(String(repeating: "g", count: 125))/pins").ids.isEmpty)
    }

    @Test("saves: newest first, per user, order-independent, only where the user can still see the conversation")
    func saves() throws {
        let app = try chat()
        try app.ingest([Self.save("s1", "m1", uid: "bob", at: past + 100), Self.save("s2", "m3", uid: "bob", at: past + 200),
                        Self.save("s3", "m2", uid: "carol", at: past + 150)], client: client)
        // an older unsave arriving late changes nothing; a newer one unsaves
        try app.ingest([Self.save("s4", "m1", uid: "bob", at: past + 50, saved: false)], client: client)
        let saved = try list(app, "/v1/users/bob/saved")
        #expect(saved.ids == ["m3", "m1"])
        let item = try #require((saved.json["data"] as? [[String: Any]])?.first)
        #expect(item["savedAt"] as? Int64 == past + 200 && item["conversationId"] as? String == "group_g1"
                    && item["receiver"] as? String == "g1" && item["sender"] as? String == "carol" && item["text"] as? String == "lunch")
        try app.ingest([Self.save("s5", "m1", uid: "bob", at: past + 300, saved: false)], client: client)
        #expect(try list(app, "/v1/users/bob/saved").ids == ["m3"])
        #expect(try lookup(app, "bob", ["m3"])["m3"]?["savedAt"] as? Int64 == past + 200)
        #expect(try lookup(app, "carol", ["m3"])["m3"]?["savedAt"] as? Int == 0, "a save is the saver's alone")
        // bob leaves the group: his saves there are no longer listed, nor looked up
        try app.ingest([Events.member("l1", "member.left", uid: "bob", at: nowMilliseconds() - 1000)], client: client)
        #expect(try list(app, "/v1/users/bob/saved").ids.isEmpty)
        #expect(try lookup(app, "bob", ["m3"]).isEmpty)
    }

    @Test("pinned conversations: the system's of the user's groups first, then the user's own, newest first")
    func pinnedConversations() throws {
        let app = try chat()
        try app.ingest([Events.message("e9", id: "d1", sender: "alice", peer: "bob", at: past + 5),
                        Self.conversationPin("c1", uid: "bob", group: nil, peer: "alice", at: past + 100),
                        Self.conversationPin("c2", uid: "bob", at: past + 200),
                        Self.conversationPin("c3", uid: "app_system", group: "g2", at: past + 300),
                        Self.conversationPin("c4", uid: "app_system", at: past + 50),
                        Self.conversationPin("c5", uid: "carol", group: "g3", at: past + 400)], client: client)
        let pinned = try list(app, "/v1/users/bob/pinned-conversations")
        #expect(pinned.ids == ["group_g1", "group_g1", "alice_user_bob"], "system pin of g1 (bob is no member of g2), then bob's own")
        let items = pinned.json["data"] as? [[String: Any]] ?? []
        #expect(items.map { $0["pinnedBy"] as? String } == ["app_system", "bob", "bob"])
        #expect(items.last?["receiver"] as? String == "alice" && items.last?["receiverType"] as? String == "user")
        let page = try list(app, "/v1/users/bob/pinned-conversations?limit=2")
        let next = try #require((page.json["meta"] as? [String: Any])?["next"] as? String)
        #expect(try list(app, "/v1/users/bob/pinned-conversations?cursor=\(next)").ids == ["alice_user_bob"])
        // unpinned at a later time: gone
        try app.ingest([Self.conversationPin("c6", uid: "bob", at: past + 500, pinned: false)], client: client)
        #expect(try list(app, "/v1/users/bob/pinned-conversations").ids == ["group_g1", "alice_user_bob"])
        // a system pin names a group
        let bad = try app.post([Self.conversationPin("c7", uid: "app_system", group: nil, peer: "alice", at: past)], client: client)
        #expect(((bad.json["results"] as? [[String: Any]])?.first?["error"] as? [String: Any]).flatMap { ($0["params"] as? [String: Any])?["field"] as? String } == "data.receiverType")
    }

    @Test("lookup: per viewer, unknown and inaccessible ids left out, at most 1000 ids; a system pin in a one-on-one takes the message's conversation")
    func lookupRules() throws {
        let app = try chat()
        try app.ingest([Events.message("e9", id: "d1", sender: "alice", peer: "bob", at: past + 5),
                        Self.pin("p1", "d1", by: "app_system", group: nil, peer: "bob", at: past + 100)], client: client)
        let states = try lookup(app, "bob", ["m1", "d1", "nope"])
        #expect(Set(states.keys) == ["m1", "d1"])
        let unset = try lookup(app, "carol", ["m1"])["m1"]
        #expect(unset?["threadSubscribed"] as? Bool == false && unset?["pinnedAt"] as? Int == 0 && unset?["pinnedBy"] is NSNull
                    && unset?["savedAt"] as? Int == 0, "carol neither started nor replied in m1's thread")
        #expect(states["d1"]?["pinnedBy"] as? String == "app_system")
        #expect(try lookup(app, "carol", ["d1"]).isEmpty, "carol is not in alice and bob's conversation")
        #expect(try lookup(app, "bob", ["m2"])["m2"]?["threadSubscribed"] as? Bool == true, "bob replied in m1's thread")
        #expect(try list(app, "/v1/conversations/alice_user_bob/pins").ids == ["d1"])
        let tooMany = try client.post("/v1/users/bob/messages/lookup", token: app.serverKey,
                                      json: Events.json(["messageIds": (0...1000).map { "m\($0)" }]))
        #expect(tooMany.status == 400 && (tooMany.json["error"] as? [String: Any])?["code"] as? String == "ERR_INVALID_LIMIT")
    }

    func syncJobs(_ app: TestApp) throws -> [[String: Any]] {
        try app.claimAll(client: client).filter { $0["kind"] as? String == "sync" }
    }

    @Test("sync jobs: a pin to every member (the actor too), a save to the saver without the acting device, a conversation pin to its user or every participant; no change, no job")
    func sync() throws {
        let app = try chat()
        _ = try app.claimAll(client: client)
        try app.ingest([Self.pin("p1", "m1", by: "alice", at: past + 100)], client: client)
        let pins = try syncJobs(app)
        #expect(recipients(pins) == ["alice", "bob", "carol"])
        let job = try #require(pins.first)
        #expect(job["reason"] as? String == "messagePinned" && job["notification"] is NSNull)
        let data = try #require(job["data"] as? [String: Any])
        #expect(data["change"] as? String == "messagePinned" && data["messageId"] as? String == "m1"
                    && data["conversationId"] as? String == "group_g1" && data["pinnedAt"] as? Int64 == past + 100
                    && data["pinnedBy"] as? String == "alice")
        // an older pin, a repeat, an unpin of nothing: no state change, no job
        try app.ingest([Self.pin("p2", "m1", by: "bob", at: past + 50), Self.pin("p3", "m3", by: "bob", at: past + 60, pinned: false)],
                       client: client)
        #expect(try syncJobs(app).isEmpty)
        try app.ingest([Self.pin("p4", "m1", by: "bob", at: past + 150, pinned: false)], client: client)
        let unpins = try syncJobs(app)
        #expect(unpins.count == 3 && (unpins.first?["data"] as? [String: Any])?["pinnedAt"] as? Int == 0)

        try app.ingest([Self.save("s1", "m3", uid: "bob", at: past + 200)], client: client)
        let saves = try syncJobs(app)
        #expect(recipients(saves) == ["bob"] && saves.first?["excludeDevice"] as? String == "phone")
        #expect((saves.first?["data"] as? [String: Any])?["savedAt"] as? Int64 == past + 200)

        try app.ingest([Self.conversationPin("c1", uid: "carol", at: past + 300),
                        Self.conversationPin("c2", uid: "app_system", at: past + 310)], client: client)
        let conversations = try syncJobs(app)
        #expect(conversations.filter { $0["reason"] as? String == "conversationPinned" }.count == 4, "carol's own, and the system pin for all three")
        #expect((conversations.first?["data"] as? [String: Any])?["conversationId"] as? String == "group_g1")

        // a deleted message, a stale event: the state is stored, nobody is told
        try app.ingest([Events.delete("d1", id: "m3", at: past + 350), Self.pin("p6", "m3", by: "bob", at: past + 360)], client: client)
        try app.ingest([Self.save("s2", "m1", uid: "bob", at: nowMilliseconds() - 2 * 86_400_000)], client: client)
        #expect(try syncJobs(app).isEmpty)
        // the app switch
        try app.patch("/v1/settings/notifications", #"{"syncJobs": false}"#, client: client)
        try app.ingest([Self.pin("p5", "m2", by: "bob", at: past + 400)], client: client)
        #expect(try syncJobs(app).isEmpty)
        #expect(try lookup(app, "alice", ["m2"])["m2"]?["pinnedAt"] as? Int64 == past + 400, "the state still changes")
    }

    func recipients(_ jobs: [[String: Any]]) -> Set<String> { Set(jobs.compactMap { $0["recipient"] as? String }) }

    @Test("maintenance forgets removed pins and saves after the app's changeRetentionSeconds, and keeps the live ones")
    func retention() throws {
        let app = try chat()
        try app.patch("/v1/settings/notifications", #"{"changeRetentionSeconds": 60}"#, client: client)
        let refused = try client.send("PATCH", "/v1/settings/notifications", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                      body: Array(#"{"changeRetentionSeconds": 59}"#.utf8))
        #expect(refused.status == 400 && refused.errorParams["field"] as? String == "changeRetentionSeconds")
        let old = nowMilliseconds() - 120_000
        try app.ingest([Self.pin("p1", "m1", by: "alice", at: old - 10), Self.pin("p2", "m1", by: "alice", at: old, pinned: false),
                        Self.pin("p3", "m3", by: "bob", at: old), Self.save("s1", "m3", uid: "bob", at: old, saved: false),
                        Self.pin("p4", "m2", by: "bob", at: nowMilliseconds(), pinned: false)], client: client)
        try environment.server.maintenance.runOnce()
        let left = try environment.connection().query("""
            SELECT 'pin:' || message_id || ':' || pinned FROM message_pins WHERE app = \(app.id)
            UNION ALL SELECT 'save:' || message_id FROM message_saves WHERE app = \(app.id) ORDER BY 1
            """)
        #expect(try left.map { try $0.decode(0, as: String.self) } == ["pin:m2:false", "pin:m3:true"],
                "the old tombstones went; the live pin and the recent unpin stay")
    }
}
