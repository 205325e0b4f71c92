import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §11.1–11.2 over HTTP: reactions notify by the `reactions` preference, once per reaction
/// id, in any order of their events; a removal cancels or retracts; the explain endpoint shows a
/// reaction's decision under the reacted message with `?event=`.
@Suite("Reactions", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ReactionTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }



    func explain(_ app: TestApp, _ uid: String, _ message: String, event: String? = nil) throws -> HTTPResult {
        let query = event.map { "?event=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0) } ?? ""
        return try client.get("/v1/users/\(uid)/messages/\(message)/routing\(query)", token: app.serverKey)
    }

    func group(_ prefix: String = "react") throws -> TestApp {
        let app = try environment.makeApp(prefix: prefix, members: ["alice", "bob", "carol", "dave"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "lunch?")], client: client)
        #expect(try app.claimAll(client: client).count == 3)
        return app
    }

    @Test("by default only the author is notified, once per reaction id; the job's template, collapse id and data")
    func ownMessage() throws {
        let app = try group()
        let added = Events.reaction("re1", id: "r1", message: "m1", reactor: "carol", at: past + 10)
        try app.ingest([added], client: client)
        try app.ingest([added], client: client, accepted: 0)
        // the same reaction under another event id: still one job
        try app.ingest([Events.reaction("re1-again", id: "r1", message: "m1", reactor: "carol", at: past + 10)], client: client)
        let jobs = try app.claimAll(client: client)
        #expect(jobs.count == 1)
        let job = try #require(jobs.first)
        #expect(job["recipient"] as? String == "alice" && job["kind"] as? String == "reaction"
                    && job["reason"] as? String == "reactionOnOwnMessage")
        let notification = try #require(job["notification"] as? [String: Any])
        #expect(notification["title"] as? String == "carol @ g1" && notification["body"] as? String == "carol reacted 👍 to your message: lunch?")
        #expect(notification["tag"] as? String == "r1" && notification["collapseId"] as? String == "r1")
        let data = try #require(job["data"] as? [String: Any])
        #expect(data["reactionId"] as? String == "r1" && data["reaction"] as? String == "👍" && data["messageId"] as? String == "m1")
        #expect((job["event"] as? [String: Any])?["id"] as? String == "re1" && (job["event"] as? [String: Any])?["type"] as? String == "reaction.added")
        // a reaction neither subscribes anyone nor changes unread counts
        let inbox = try client.get("/v1/users/carol/threads", token: app.serverKey).json["data"] as? [[String: Any]] ?? []
        #expect(inbox.isEmpty, "carol did not subscribe to m1 by reacting: \(inbox)")
    }

    @Test("SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES notifies others; an unsubscribed thread's reply only its author; the reactor never")
    func allMessages() throws {
        let app = try group()
        for uid in ["bob", "dave", "carol"] {
            try app.patch("/v1/users/\(uid)/preferences", #"{"groupPreferences": {"reactions": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"}}"#, client: client)
        }
        try app.ingest([Events.reaction("re1", id: "r1", message: "m1", reactor: "carol", at: past + 10)], client: client)
        var jobs = try app.claimAll(client: client)
        var byRecipient = Dictionary(uniqueKeysWithValues: jobs.map { ($0["recipient"] as? String ?? "", $0) })
        #expect(Set(byRecipient.keys) == ["alice", "bob", "dave"], "the author and the two who want all reactions, not carol")
        #expect(byRecipient["bob"]?["reason"] as? String == "reactionOnMessage")
        #expect((byRecipient["bob"]?["notification"] as? [String: Any])?["body"] as? String == "carol reacted 👍 to alice's message: lunch?")

        // a reply by bob in m1's thread; dave unsubscribes from it, bob (its author) too
        try app.ingest([Events.message("e2", id: "m2", sender: "bob", parent: "m1", at: past + 20, text: "yes")], client: client)
        _ = try app.claimAll(client: client)
        for uid in ["dave", "bob"] {
            #expect(try client.delete("/v1/users/\(uid)/threads/m1/subscription", token: app.serverKey).status == 200)
        }
        try app.ingest([Events.reaction("re2", id: "r2", message: "m2", reactor: "carol", reaction: "🎉", at: nowMilliseconds())], client: client)
        jobs = try app.claimAll(client: client)
        byRecipient = Dictionary(uniqueKeysWithValues: jobs.map { ($0["recipient"] as? String ?? "", $0) })
        #expect(Set(byRecipient.keys) == ["bob"], "dave unsubscribed from the thread; bob wrote the reply; alice has the default")
        #expect(byRecipient["bob"]?["reason"] as? String == "reactionOnOwnMessage")
        #expect(try explain(app, "dave", "m2", event: "chat/re2").json["reason"] as? String == "UNSUBSCRIBED")
        #expect(try explain(app, "alice", "m2", event: "chat/re2").json["reason"] as? String == "REACTIONS_PREFERENCE")
        #expect(try explain(app, "carol", "m2", event: "chat/re2").json["reason"] as? String == "SENDER")
        let bob = try explain(app, "bob", "m2", event: "chat/re2").json
        #expect(bob["notified"] as? Bool == true && bob["reason"] as? String == "reactionOnOwnMessage" && bob["jobId"] as? String != nil)
        // the message's own event explains the message (dave was pushed the reply); an event of no
        // reaction to it is a 404
        let own = try explain(app, "dave", "m2", event: "chat/e2")
        #expect(own.status == 200 && own.json["jobId"] as? String != nil && own.json["reason"] as? String == "allReplies", "\(own.text)")
        let unknown = try explain(app, "bob", "m2", event: "chat/re1")
        #expect(unknown.status == 404 && (unknown.json["error"] as? [String: Any])?["code"] as? String == "ERR_MESSAGE_ID_NOT_FOUND")
    }

    @Test("a thread's unsubscribe is judged at the reaction's time: made before it but delivered after, the reaction notifies (issue 32, item 11)")
    func unsubscribeAtReactionTime() throws {
        let app = try group()
        try app.patch("/v1/users/dave/preferences", #"{"groupPreferences": {"reactions": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"}}"#, client: client)
        try app.ingest([Events.message("e2", id: "m2", sender: "bob", parent: "m1", at: past + 20, text: "yes")], client: client)
        _ = try app.claimAll(client: client)
        #expect(try client.delete("/v1/users/dave/threads/m1/subscription", token: app.serverKey).status == 200)
        // r2 was made an hour before dave's unsubscribe, and arrives after it; r3 is made after it
        try app.ingest([Events.reaction("re2", id: "r2", message: "m2", reactor: "carol", at: past + 30)], client: client)
        try app.ingest([Events.reaction("re3", id: "r3", message: "m2", reactor: "carol", reaction: "🎉", at: nowMilliseconds() + 1_000)],
                       client: client)
        let dave = try app.claimAll(client: client).filter { $0["recipient"] as? String == "dave" }
        #expect(dave.map { ($0["data"] as? [String: Any])?["reactionId"] as? String } == ["r2"], "\(dave)")
        let before = try explain(app, "dave", "m2", event: "chat/re2").json
        #expect(before["notified"] as? Bool == true && before["reason"] as? String == "reactionOnMessage" && before["jobId"] as? String != nil,
                "\(before)")
        #expect(try explain(app, "dave", "m2", event: "chat/re3").json["reason"] as? String == "UNSUBSCRIBED")
    }

    @Test("a removal before its reaction.added leaves no job; after a claim it retracts once; an unclaimed job is cancelled")
    func removal() throws {
        let app = try group()
        // removal first, then the add
        try app.ingest([Events.reaction("rx1", id: "r1", message: "m1", reactor: "carol", at: past + 20, removed: true)], client: client)
        try app.ingest([Events.reaction("ra1", id: "r1", message: "m1", reactor: "carol", at: past + 10)], client: client)
        #expect(try app.claimAll(client: client).isEmpty, "the reaction was removed before it was seen added")
        #expect(try explain(app, "alice", "m1", event: "chat/ra1").json["notified"] as? Bool == false)

        // claimed, then removed: one retraction; the removal redelivered adds none
        try app.ingest([Events.reaction("ra2", id: "r2", message: "m1", reactor: "bob", reaction: "❤️", at: past + 30)], client: client)
        #expect(try app.claimAll(client: client).count == 1)
        let removed = Events.reaction("rx2", id: "r2", message: "m1", reactor: "bob", reaction: "❤️", at: past + 40, removed: true)
        try app.ingest([removed], client: client)
        try app.ingest([removed], client: client, accepted: 0)
        try app.ingest([Events.reaction("rx2-again", id: "r2", message: "m1", reactor: "bob", reaction: "❤️", at: past + 41, removed: true)],
                       client: client)
        let retractions = try app.claimAll(client: client)
        #expect(retractions.count == 1)
        let retraction = try #require(retractions.first)
        #expect(retraction["recipient"] as? String == "alice" && retraction["kind"] as? String == "retract"
                    && retraction["reason"] as? String == "reactionRemoved")
        #expect(retraction["notification"] is NSNull)
        let data = try #require(retraction["data"] as? [String: Any])
        #expect(data["messageId"] as? String == "m1" && data["collapseIds"] as? [String] == ["r2"])

        // not claimed yet, then removed: cancelled, nothing to retract
        try app.ingest([Events.reaction("ra3", id: "r3", message: "m1", reactor: "dave", at: past + 50),
                        Events.reaction("rx3", id: "r3", message: "m1", reactor: "dave", at: past + 60, removed: true)], client: client)
        try app.ingest([Events.reaction("ra4", id: "r4", message: "m1", reactor: "dave", at: past + 70)], client: client)
        try app.ingest([Events.reaction("rx4", id: "r4", message: "m1", reactor: "dave", at: past + 80, removed: true)], client: client)
        #expect(try app.claimAll(client: client).isEmpty)
        let cancelled = try environment.connection().query(
            "SELECT count(*) FROM jobs WHERE app = \(app.id) AND subject_id = 'r4' AND state = 'cancelled'")
        #expect(try cancelled[0].decode(0, as: Int.self) == 1)
    }

    @Test("a reaction before its message is routed with the event's messageSender and parentId; the message adds no second job")
    func beforeMessage() throws {
        let app = try environment.makeApp(prefix: "react", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.patch("/v1/users/bob/preferences", #"{"groupPreferences": {"reactions": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"}}"#, client: client)
        try app.ingest([Events.reaction("re1", id: "r1", message: "m2", reactor: "carol", at: past + 10, messageSender: "alice", parent: "m1")],
                       client: client)
        let jobs = try app.claimAll(client: client)
        #expect(Set(jobs.compactMap { $0["recipient"] as? String }) == ["alice", "bob"])
        let alice = try #require(jobs.first { $0["recipient"] as? String == "alice" })
        #expect((alice["notification"] as? [String: Any])?["body"] as? String == "carol reacted 👍 to your message", "no text yet")
        #expect((alice["data"] as? [String: Any])?["parentMessageId"] as? String == "m1")
        try app.ingest([Events.message("e1", id: "m1", sender: "bob", at: past),
                        Events.message("e2", id: "m2", sender: "alice", parent: "m1", at: past + 5, text: "sure")], client: client)
        #expect(try app.claimAll(client: client).allSatisfy { $0["kind"] as? String != "reaction" })
        #expect(try explain(app, "alice", "m2", event: "chat/re1").json["reason"] as? String == "reactionOnOwnMessage")
    }

    @Test("deleted messages: a reaction to one notifies nobody; deleting a message retracts its reactions' pushes; one-on-one; stale; privacy")
    func deletionsAndOneOnOne() throws {
        let app = try group()
        try app.ingest([Events.delete("d1", id: "m1", at: past + 5)], client: client)
        #expect(try app.claimAll(client: client).allSatisfy { $0["kind"] as? String == "retract" }, "the pushes of m1 are retracted")
        try app.ingest([Events.reaction("re1", id: "r1", message: "m1", reactor: "carol", at: past + 10)], client: client)
        #expect(try app.claimAll(client: client).isEmpty)

        try app.ingest([Events.message("e2", id: "m2", sender: "alice", at: past + 20, text: "again")], client: client)
        _ = try app.claimAll(client: client)
        try app.ingest([Events.reaction("re2", id: "r2", message: "m2", reactor: "carol", at: past + 30)], client: client)
        #expect(try app.claimAll(client: client).count == 1)
        try app.ingest([Events.delete("d2", id: "m2", at: past + 40)], client: client)
        #expect(try explain(app, "alice", "m2", event: "chat/re2").status == 404, "a deleted message has nothing to explain, event or not")
        let retractions = try app.claimAll(client: client).filter { $0["recipient"] as? String == "alice" }
        #expect(retractions.count == 1 && (retractions.first?["data"] as? [String: Any])?["collapseIds"] as? [String] == ["r2"],
                "alice was pushed only the reaction: \(retractions)")

        // one-on-one: the peer who wrote the message; the title is the reactor
        try app.ingest([Events.message("e3", id: "d1m", sender: "alice", peer: "bob", at: past + 50, text: "psst")], client: client)
        _ = try app.claimAll(client: client)
        try app.ingest([Events.reaction("re3", id: "r3", message: "d1m", reactor: "bob", reaction: "😀", group: nil, peer: "alice", at: past + 60)],
                       client: client)
        let direct = try app.claimAll(client: client)
        #expect(direct.count == 1 && direct.first?["recipient"] as? String == "alice")
        #expect((direct.first?["notification"] as? [String: Any])?["title"] as? String == "bob")
        #expect((direct.first?["data"] as? [String: Any])?["receiver"] as? String == "bob")

        // stale: no job, explain says STALE
        try app.ingest([Events.reaction("re4", id: "r4", message: "d1m", reactor: "bob", group: nil, peer: "alice",
                                        at: nowMilliseconds() - 2 * 86_400_000)], client: client)
        #expect(try app.claimAll(client: client).isEmpty)
        #expect(try explain(app, "alice", "d1m", event: "chat/re4").json["reason"] as? String == "STALE")

        // privacy
        try app.patch("/v1/settings/notifications", #"{"privacyTemplateMode": "PRIVACY"}"#, client: client)
        try app.ingest([Events.reaction("re5", id: "r5", message: "d1m", reactor: "bob", group: nil, peer: "alice", at: past + 70)],
                       client: client)
        let privacy = try app.claimAll(client: client)
        #expect((privacy.first?["notification"] as? [String: Any])?["title"] as? String == "New reaction")
        #expect((privacy.first?["notification"] as? [String: Any])?["body"] as? String == "New reaction", "SPEC §11.2: the privacy body")
    }

    @Test("invalid reaction events are rejected naming the field; the rest of the batch applies")
    func badInput() throws {
        let app = try group()
        var missing = Events.reaction("bad1", id: "r1", message: "m1", reactor: "carol", at: past + 10)
        var data = missing["data"] as! [String: Any]
        data.removeValue(forKey: "reactor")
        missing["data"] = data
        let tooLong = Events.reaction("bad2", id: "r2", message: "m1", reactor: "carol", reaction: String(repeating: "x", count: 65), at: past + 10)
        let response = try app.post([missing, tooLong, Events.reaction("ok", id: "r3", message: "m1", reactor: "carol", at: past + 10)],
                                    client: client)
        #expect(response.json["accepted"] as? Int == 1 && response.json["rejected"] as? Int == 2)
        let results = response.json["results"] as? [[String: Any]] ?? []
        let fields = results.prefix(2).map { (($0["error"] as? [String: Any])?["params"] as? [String: Any])?["field"] as? String }
        #expect(fields == ["data.reactor", "data.reaction"])
        #expect(try app.claimAll(client: client).count == 1)
    }

    @Test("a reaction in binary mode and in structured mode is applied as in a batch")
    func modes() throws {
        let app = try group()
        let data = #"{"id": "r1", "messageId": "m1", "reactor": "carol", "reaction": "👍", "receiverType": "group", "receiver": "g1", "at": \#(past + 10)}"#
        let binary = try client.send("POST", "/v1/events", token: app.ingestKey,
                                     headers: ["Content-Type": "application/json", "ce-specversion": "1.0", "ce-id": "b1",
                                               "ce-source": "chat", "ce-type": "reaction.added"], body: Array(data.utf8))
        #expect(binary.status == 200 && binary.json["accepted"] as? Int == 1, "\(binary.text)")
        let structured = Events.reaction("s1", id: "r2", message: "m1", reactor: "bob", at: past + 20)
        let one = try client.post("/v1/events", token: app.ingestKey, json: Events.json(structured),
                                  headers: ["Content-Type": "application/cloudevents+json"])
        #expect(one.status == 200 && one.json["accepted"] as? Int == 1, "\(one.text)")
        let jobs = try app.claimAll(client: client)
        #expect(Set(jobs.compactMap { ($0["data"] as? [String: Any])?["reactionId"] as? String }) == ["r1", "r2"])
    }

    @Test("a reaction job is not the reply's own job: a late trigger still routes the reply to its user")
    func lateTriggerAfterReaction() throws {
        let app = try environment.makeApp(prefix: "react", members: ["alice", "bob", "carol", "dave"], joinedAt: past - 100_000)
        try app.patch("/v1/users/carol/preferences", #"""
            {"groupPreferences": {"replies": "SUBSCRIBE_TO_SUBSCRIBED_THREADS", "reactions": "SUBSCRIBE_TO_REACTIONS_ON_ALL_MESSAGES"}}
            """#, client: client)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past),
                        Events.message("e2", id: "m2", sender: "bob", parent: "m1", at: past + 200, text: "later")], client: client)
        #expect(try app.claimAll(client: client).allSatisfy { $0["recipient"] as? String != "carol" || ($0["data"] as? [String: Any])?["messageId"] as? String == "m1" })
        try app.ingest([Events.reaction("re1", id: "r1", message: "m2", reactor: "dave", at: past + 300)], client: client)
        // carol's own reply from before m2 arrives late: she was subscribed when m2 was sent
        try app.ingest([Events.message("e3", id: "m3", sender: "carol", parent: "m1", at: past + 100)], client: client)
        let carol = try app.claimAll(client: client).filter { $0["recipient"] as? String == "carol" }
        let kinds = Set(carol.map { "\($0["kind"] as? String ?? "")/\($0["reason"] as? String ?? "")/\(($0["data"] as? [String: Any])?["messageId"] as? String ?? "")" })
        #expect(kinds == ["reaction/reactionOnMessage/m2", "reply/subscribedThread/m2"], "\(kinds)")
    }
}
