import Postgres
import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §5.1–§5.3, one rule per test, through HTTP against PostgreSQL.
@Suite("Subscription rules", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct SubscriptionRulesTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    /// Event times well in the past and well in the future of any API call the tests make.
    let past = nowMilliseconds() - 3_600_000
    let future = nowMilliseconds() + 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// A fresh app whose group g1 has alice, bob, carol and dave as members since `past - 1000`.
    func app() throws -> TestApp {
        let app = try environment.makeApp(prefix: "rules")
        let joins = ["alice", "bob", "carol", "dave"].enumerated().map {
            Events.member("join-\($0.element)", "member.joined", uid: $0.element, at: past - 1000 + Int64($0.offset))
        }
        #expect(try app.post(joins, client: client).json["accepted"] as? Int == 4)
        return app
    }

    func state(_ app: TestApp, _ uid: String, _ message: String) throws -> [String: Any] {
        let response = try app.subscription(uid, message, client: client)
        #expect(response.status == 200, "\(uid) on \(message): \(response.text)")
        return response.json
    }

    func unsubscribe(_ app: TestApp, _ uid: String, _ message: String) throws -> HTTPResult {
        try client.delete("/v1/users/\(uid)/threads/\(message)/subscription", token: app.serverKey)
    }

    func subscribe(_ app: TestApp, _ uid: String, _ message: String) throws -> HTTPResult {
        try client.send("PUT", "/v1/users/\(uid)/threads/\(message)/subscription", token: app.serverKey)
    }

    @Test("the starter of a thread is subscribed with reason started, at the parent's time")
    func starter() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past)], client: client)
        let bob = try state(app, "bob", "m7")
        #expect(bob["subscribed"] as? Bool == true)
        #expect(bob["source"] as? String == "auto")
        #expect(bob["reason"] as? String == "started")
        #expect(bob["since"] as? Int64 == past)
        #expect(bob["parentMessageId"] as? String == "m7")
        #expect(try state(app, "alice", "m7")["subscribed"] as? Bool == false)
        #expect(try state(app, "alice", "m7")["since"] is NSNull)
    }

    @Test("a replier is subscribed with reason reply; mentioned members with reason mention")
    func replierAndMentions() throws {
        let app = try app()
        try app.ingest([
            Events.message("e1", id: "m7", sender: "bob", at: past),
            Events.message("e2", id: "m8", sender: "alice", parent: "m7", at: past + 10, mentions: ["carol"]),
        ], client: client)
        let alice = try state(app, "alice", "m7")
        #expect(alice["reason"] as? String == "reply")
        #expect(alice["since"] as? Int64 == past + 10)
        let carol = try state(app, "carol", "m8")
        #expect(carol["parentMessageId"] as? String == "m7", "a reply id resolves to its thread")
        #expect(carol["reason"] as? String == "mention")
        #expect(try state(app, "dave", "m7")["subscribed"] as? Bool == false)
    }

    @Test("mentions in a top-level message subscribe the mentioned members to its thread")
    func topLevelMentions() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past, mentions: ["dave"])], client: client)
        #expect(try state(app, "dave", "m7")["reason"] as? String == "mention")
    }

    @Test("@all subscribes nobody")
    func atAll() throws {
        let app = try app()
        try app.ingest([
            Events.message("e1", id: "m7", sender: "bob", at: past),
            Events.message("e2", id: "m8", sender: "alice", parent: "m7", at: past + 10, mentionsAll: true),
        ], client: client)
        for uid in ["carol", "dave"] { #expect(try state(app, uid, "m7")["subscribed"] as? Bool == false) }
    }

    @Test("a mention of a non-member does nothing; membership is judged at the mention's time")
    func nonMemberMention() throws {
        let app = try app()
        try app.ingest([
            Events.message("e1", id: "m7", sender: "bob", at: past),
            Events.message("e2", id: "m8", sender: "alice", parent: "m7", at: past + 10, mentions: ["erin"]),
            Events.member("e3", "member.joined", uid: "erin", at: past + 20),        // joined after the mention
        ], client: client)
        #expect(try state(app, "erin", "m7")["subscribed"] as? Bool == false)
        let rows = try environment.connection().query(
            "SELECT count(*) FROM subscriptions WHERE app = \(app.id) AND uid = 'erin'")
        #expect(try rows[0].decode(0, as: Int.self) == 0, "no row at all")
        // A member who left before the mention is not subscribed either.
        try app.ingest([
            Events.member("e4", "member.left", uid: "dave", at: past + 5),
            Events.message("e5", id: "m9", sender: "alice", parent: "m7", at: past + 30, mentions: ["dave"]),
            Events.member("e6", "member.joined", uid: "dave", at: past + 40),
        ], client: client)
        #expect(try state(app, "dave", "m7")["subscribed"] as? Bool == false)
    }

    @Test("the parent's author is subscribed by a reply (from parentSender), reason started, unless they have a row")
    func parentAuthor() throws {
        let app = try app()
        // Only a reply is known, naming the parent's author.
        try app.ingest([Events.message("e1", id: "r1", sender: "alice", parent: "p1", parentSender: "bob", at: past + 10)],
                         client: client)
        let bob = try state(app, "bob", "p1")
        #expect(bob["subscribed"] as? Bool == true)
        #expect(bob["reason"] as? String == "started")
        // An author who unsubscribed is not re-subscribed by later replies of others.
        #expect(try unsubscribe(app, "bob", "p1").json["subscribed"] as? Bool == false)
        try app.ingest([Events.message("e2", id: "r2", sender: "carol", parent: "p1", parentSender: "bob", at: future)],
                         client: client)
        #expect(try state(app, "bob", "p1")["subscribed"] as? Bool == false)
    }

    @Test("the parent's author named only by later replies is subscribed, inboxed and pushed whatever the delivery order (issue 32, item 10)")
    func parentAuthorNamedLater() throws {
        var outcomes: [String] = []
        // The parent never arrives; r1 does not name its author, r2 and r3 name bob.
        for order in [["r1", "r2", "r3"], ["r3", "r2", "r1"], ["r2", "r1", "r3"]] {
            let app = try app()
            try app.patch("/v1/users/bob/preferences", #"{"groupPreferences": {"replies": "SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}"#,
                          client: client)
            let events = [
                "r1": Events.message("e1", id: "r1", sender: "alice", parent: "p1", at: past + 10),
                "r2": Events.message("e2", id: "r2", sender: "carol", parent: "p1", parentSender: "bob", at: past + 20),
                "r3": Events.message("e3", id: "r3", sender: "dave", parent: "p1", parentSender: "bob", at: past + 30),
            ]
            for id in order { try app.ingest([events[id]!], client: client) }
            let bob = try state(app, "bob", "p1")
            #expect(bob["subscribed"] as? Bool == true && bob["reason"] as? String == "started", "\(order): \(bob)")
            let inbox = try client.get("/v1/users/bob/threads", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
            let pushed = try app.claimAll(client: client).filter { $0["recipient"] as? String == "bob" }.map {
                "\(($0["data"] as? [String: Any])?["messageId"] ?? "?"):\($0["reason"] ?? "?")"
            }
            outcomes.append("since \(bob["since"] ?? "-"), inbox \(inbox.map { "\($0["parentMessageId"] ?? "?"):\($0["replyCount"] ?? "?"):\($0["unreadReplyCount"] ?? "?")" }), jobs \(pushed.sorted())")
        }
        // started at the first reply that names bob; every reply unread; the replies from then on pushed
        #expect(outcomes[0] == "since \(past + 20), inbox [\"p1:3:3\"], jobs [\"r2:subscribedThread\", \"r3:subscribedThread\"]", "\(outcomes)")
        #expect(Set(outcomes).count == 1, "\(outcomes)")
    }

    @Test("unsubscribe, then a newer reply by the same user: subscribed again")
    func newerOwnReply() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        let off = try unsubscribe(app, "alice", "m7")
        #expect(off.status == 200)
        #expect(off.json["subscribed"] as? Bool == false)
        #expect(off.json["since"] as? Int64 ?? 0 > past)
        try app.ingest([Events.message("e3", id: "r2", sender: "alice", parent: "m7", at: future)], client: client)
        let alice = try state(app, "alice", "m7")
        #expect(alice["subscribed"] as? Bool == true)
        #expect(alice["reason"] as? String == "reply")
        #expect(alice["since"] as? Int64 == future)
    }

    @Test("unsubscribe, then an older reply arrives late (or is redelivered): still unsubscribed")
    func olderReply() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        _ = try unsubscribe(app, "alice", "m7")
        let redelivered = try app.post([Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        #expect((redelivered.json["results"] as? [[String: Any]])?.first?["status"] as? String == "duplicate")
        try app.ingest([Events.message("e3", id: "r0", sender: "alice", parent: "m7", at: past + 5)], client: client)
        #expect(try state(app, "alice", "m7")["subscribed"] as? Bool == false)
    }

    @Test("unsubscribe, then another user's reply: still unsubscribed")
    func otherUsersReply() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        _ = try unsubscribe(app, "alice", "m7")
        try app.ingest([Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: future)], client: client)
        #expect(try state(app, "alice", "m7")["subscribed"] as? Bool == false)
    }

    @Test("unsubscribe, then a newer mention: subscribed again with reason mention")
    func newerMention() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        _ = try unsubscribe(app, "alice", "m7")
        try app.ingest([Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: past + 20, mentions: ["alice"])],
                         client: client)
        #expect(try state(app, "alice", "m7")["subscribed"] as? Bool == false, "an older mention does not")
        try app.ingest([Events.message("e4", id: "r3", sender: "carol", parent: "m7", at: future, mentions: ["alice"])],
                         client: client)
        let alice = try state(app, "alice", "m7")
        #expect(alice["subscribed"] as? Bool == true)
        #expect(alice["reason"] as? String == "mention")
    }

    @Test("a trigger on a subscribed row changes nothing: source, reason and since stay")
    func triggerOnSubscribed() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        let before = try state(app, "alice", "m7")
        try app.ingest([Events.message("e3", id: "r2", sender: "carol", parent: "m7", at: past + 20, mentions: ["alice"]),
                          Events.message("e4", id: "r3", sender: "alice", parent: "m7", at: past + 30)], client: client)
        let after = try state(app, "alice", "m7")
        #expect(after["reason"] as? String == before["reason"] as? String)
        #expect(after["since"] as? Int64 == before["since"] as? Int64)
        #expect(after["source"] as? String == "auto")
    }

    @Test("an edit that adds a mention subscribes the newly mentioned member; one already mentioned is not new")
    func editMentions() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10, mentions: ["carol"])],
                         client: client)
        _ = try unsubscribe(app, "carol", "m7")
        try app.ingest([Events.edit("e3", id: "r1", sender: "alice", parent: "m7", at: future, mentions: ["carol", "dave"])],
                         client: client)
        let dave = try state(app, "dave", "m7")
        #expect(dave["subscribed"] as? Bool == true)
        #expect(dave["reason"] as? String == "mention")
        #expect(dave["since"] as? Int64 == future)
        #expect(try state(app, "carol", "m7")["subscribed"] as? Bool == false, "carol was mentioned before: not new")
    }

    @Test("explicit subscribe and unsubscribe are idempotent; subscribing to a thread with no replies works")
    func explicitIdempotent() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past)], client: client)
        let first = try subscribe(app, "carol", "m7")
        #expect(first.status == 200)
        #expect(first.json["subscribed"] as? Bool == true)
        #expect(first.json["source"] as? String == "manual")
        #expect(first.json["reason"] as? String == "manual")
        let second = try subscribe(app, "carol", "m7")
        #expect(second.json["since"] as? Int64 == first.json["since"] as? Int64, "PUT on a manual row changes nothing")
        let off = try unsubscribe(app, "carol", "m7")
        let offAgain = try unsubscribe(app, "carol", "m7")
        #expect(off.json["subscribed"] as? Bool == false)
        #expect(offAgain.json["subscribed"] as? Bool == false)
        #expect(off.json["source"] == nil)
    }

    @Test("PUT on an automatic subscription makes it manual and keeps since")
    func putOnAuto() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past)], client: client)
        let put = try subscribe(app, "bob", "m7")
        #expect(put.json["source"] as? String == "manual")
        #expect(put.json["reason"] as? String == "manual")
        #expect(put.json["since"] as? Int64 == past)
    }

    @Test("DELETE with no row leaves an unsubscribed row, and the ordering guard applies to later triggers")
    func deleteWithoutRow() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past)], client: client)
        let off = try unsubscribe(app, "dave", "m7")
        #expect(off.status == 200)
        #expect(off.json["subscribed"] as? Bool == false)
        let rows = try environment.connection().query(
            "SELECT subscribed, unsubscribed_at FROM subscriptions WHERE app = \(app.id) AND uid = 'dave' AND thread_id = 'm7'")
        #expect(rows.count == 1)
        #expect(try rows[0].decode(0, as: Bool.self) == false)
        try app.ingest([Events.message("e2", id: "r1", sender: "carol", parent: "m7", at: past + 10, mentions: ["dave"])],
                         client: client)
        #expect(try state(app, "dave", "m7")["subscribed"] as? Bool == false)
    }

    @Test("a repeated DELETE changes nothing: the row, its since and its unsubscribe time stay (SPEC §5.2)")
    func repeatedDelete() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        let query: SQL = "SELECT row(subscribed, since, unsubscribed_at, updated_at)::text FROM subscriptions WHERE app = \(app.id) AND uid = 'alice' AND thread_id = 'm7'"
        #expect(try unsubscribe(app, "alice", "m7").json["subscribed"] as? Bool == false)
        let first = try environment.connection().query(query)[0].decode(0, as: String.self)
        let firstState = try state(app, "alice", "m7")
        usleep(20_000)
        #expect(try unsubscribe(app, "alice", "m7").status == 200)
        #expect(try environment.connection().query(query)[0].decode(0, as: String.self) == first)
        #expect(try state(app, "alice", "m7")["since"] as? Int == firstState["since"] as? Int)
    }

    @Test("unknown and deleted messages are 404; a user without access is 403 (404 first)")
    func errors() throws {
        let app = try app()
        let unknown = try subscribe(app, "alice", "nope")
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == "ERR_MESSAGE_ID_NOT_FOUND")
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        let outsider = try subscribe(app, "mallory", "m7")
        #expect(outsider.status == 403)
        #expect(outsider.errorCode == "ERR_MESSAGE_NO_ACCESS")
        #expect(try app.subscription("mallory", "m7", client: client).status == 403)
        try app.ingest([Events.delete("e3", id: "r1", parent: "m7", at: past + 20)], client: client)
        #expect(try subscribe(app, "alice", "r1").status == 404, "a deleted reply")
        #expect(try subscribe(app, "alice", "m7").status == 200, "its thread lives on")
        try app.ingest([Events.delete("e4", id: "m7", at: past + 30)], client: client)
        for response in [try subscribe(app, "alice", "m7"), try unsubscribe(app, "alice", "m7"),
                         try app.subscription("alice", "m7", client: client), try subscribe(app, "mallory", "m7")] {
            #expect(response.status == 404)
            #expect(response.errorCode == "ERR_MESSAGE_ID_NOT_FOUND")
        }
    }

    @Test("group.deleted deletes every thread of the group")
    func groupDeleted() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.event("e2", "group.deleted", ["guid": "g1", "at": past + 100])], client: client)
        #expect(try subscribe(app, "bob", "m7").status == 404)
    }

    @Test("bulk lookup: replies report their thread; unknown, deleted and inaccessible ids are false; over 1000 ids is 400")
    func lookup() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10),
                          Events.message("e3", id: "m8", sender: "carol", at: past),
                          Events.message("e4", id: "m9", sender: "bob", at: past),
                          Events.delete("e5", id: "m9", at: past + 1)], client: client)
        let response = try client.post("/v1/users/bob/subscriptions/lookup", token: app.serverKey,
                                       json: #"{"messageIds": ["m7", "r1", "m8", "m9", "nope"]}"#)
        #expect(response.status == 200)
        let data = response.json["data"] as? [String: Bool] ?? [:]
        #expect(data == ["m7": true, "r1": true, "m8": false, "m9": false, "nope": false])
        let outsider = try client.post("/v1/users/mallory/subscriptions/lookup", token: app.serverKey, json: #"{"messageIds": ["m7"]}"#)
        #expect(outsider.json["data"] as? [String: Bool] == ["m7": false])
        let tooMany = Events.json(["messageIds": (0...1000).map { "m\($0)" }])
        let refused = try client.post("/v1/users/bob/subscriptions/lookup", token: app.serverKey, json: tooMany)
        #expect(refused.status == 400)
        #expect(refused.errorCode == "ERR_INVALID_LIMIT")
    }

    @Test("leaving hides the user's subscriptions in the group at once; rejoining restores them")
    func lossOfAccess() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: past + 10)], client: client)
        let lookup = { () throws -> Bool? in
            let response = try client.post("/v1/users/alice/subscriptions/lookup", token: app.serverKey, json: #"{"messageIds": ["m7"]}"#)
            return (response.json["data"] as? [String: Bool])?["m7"]
        }
        #expect(try lookup() == true)
        for (index, type) in ["member.left", "member.kicked", "member.banned"].enumerated() {
            try app.ingest([Events.member("leave-\(index)", type, uid: "alice", at: past + 100 + Int64(index) * 100)], client: client)
            #expect(try lookup() == false, "\(type)")
            #expect(try app.subscription("alice", "m7", client: client).status == 403)
            try app.ingest([Events.member("join-\(index)", "member.added", uid: "alice", at: past + 150 + Int64(index) * 100)],
                             client: client)
            #expect(try lookup() == true, "back after rejoining")
            #expect(try state(app, "alice", "m7")["reason"] as? String == "reply", "the row was kept")
        }
        // member.unbanned and scopeChanged are accepted and change nothing.
        let response = try app.post([Events.member("u1", "member.unbanned", uid: "alice", at: past + 900),
                                     Events.member("u2", "member.scopeChanged", uid: "alice", at: past + 901)], client: client)
        #expect(response.json["accepted"] as? Int == 2)
        #expect(try lookup() == true)
    }

    @Test("the membership snapshot replaces the member set and lists members with paging")
    func snapshot() throws {
        let app = try environment.makeApp(prefix: "snap")
        #expect(try app.setMembers("g2", ["u1", "u2", "u3"], client: client).json["count"] as? Int == 3)
        try app.ingest([Events.message("e1", id: "m1", sender: "u1", group: "g2", at: past),
                          Events.message("e2", id: "r1", sender: "u2", group: "g2", parent: "m1", at: past + 1)], client: client)
        #expect(try app.subscribed("u2", "m1", client: client) == true)
        #expect(try app.setMembers("g2", ["u1", "u3", "u4"], client: client).json["count"] as? Int == 3)
        #expect(try app.subscription("u2", "m1", client: client).status == 403, "u2 was dropped")
        var uids: [String] = []
        var cursor: String?
        repeat {
            let page = try client.get("/v1/groups/g2/members?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), token: app.serverKey)
            #expect(page.status == 200)
            uids += (page.json["data"] as? [[String: Any]] ?? []).compactMap { $0["uid"] as? String }
            cursor = (page.json["meta"] as? [String: Any])?["next"] as? String
        } while cursor != nil && uids.count < 100
        #expect(uids == ["u1", "u3", "u4"])
        let unknown = try client.get("/v1/groups/nobody/members", token: app.serverKey)
        #expect(unknown.status == 200)
        #expect((unknown.json["data"] as? [Any])?.isEmpty == true)
        let bad = try client.send("PUT", "/v1/groups/g2/members", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                  body: Array(#"{"members": ["ok", 5.5]}"#.utf8))
        #expect(bad.status == 400)
        #expect(bad.errorParams["field"] as? String == "members[1]")
    }

    @Test("one-on-one threads: both users are members; a third user mentioned is not")
    func oneOnOne() throws {
        let app = try environment.makeApp(prefix: "dm")
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", peer: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "bob", peer: "alice", parent: "m1", at: past + 1,
                                         mentions: ["alice", "carol"])], client: client)
        #expect(try app.subscribed("alice", "m1", client: client) == true)
        #expect(try app.subscribed("bob", "m1", client: client) == true)
        #expect(try app.subscription("carol", "m1", client: client).status == 403)
    }

    @Test("an unsubscribe holds over a trigger already received that is dated later than now (bus clock ahead)")
    func unsubscribeOverFutureDatedTrigger() throws {
        let app = try app()
        try app.ingest([Events.message("e1", id: "m7", sender: "bob", at: past),
                          Events.message("e2", id: "r1", sender: "alice", parent: "m7", at: future, mentions: ["carol"])],
                         client: client)
        let off = try unsubscribe(app, "carol", "m7")
        #expect(off.json["subscribed"] as? Bool == false)
        #expect(off.json["since"] as? Int64 == future)
        #expect(try state(app, "carol", "m7")["subscribed"] as? Bool == false)
        try app.ingest([Events.message("e3", id: "r2", sender: "alice", parent: "m7", at: future + 10, mentions: ["carol"])],
                         client: client)
        #expect(try state(app, "carol", "m7")["subscribed"] as? Bool == true, "a newer mention still re-subscribes")
    }
}
