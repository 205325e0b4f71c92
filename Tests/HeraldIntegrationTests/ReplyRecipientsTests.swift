import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §8.1 with the app's group replies at `SUBSCRIBE_TO_SUBSCRIBED_THREADS`: a reply notifies
/// the members whose own state says so — a subscription, a level, a mention, a quote, stored
/// preferences — and nobody else; ingest reads only those members (Fanout.produce), so each
/// kind of state is checked here, against explain too.
@Suite("Who a reply notifies", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ReplyRecipientsTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws { environment = try TestEnvironment.shared() }

    func send(_ app: TestApp, _ method: String, _ path: String, _ body: String) throws -> HTTPResult {
        try client.send(method, path, token: app.serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    @Test("replies at subscribed threads: each member's own state notifies them, members without any are not, and explain agrees",
          arguments: [false, true])
    func ownState(inBatchWithOthers: Bool) throws {
        let app = try environment.makeApp(prefix: "recipients")
        #expect(try send(app, "PATCH", "/v1/settings/notifications",
                         #"{"groupPreferences":{"replies":{"value":"SUBSCRIBE_TO_SUBSCRIBED_THREADS"}}}"#).status == 200)
        let members = ["owner", "replier", "prefs", "level", "mentioned", "quoted", "plain", "tuned", "manual", "muted", "gone"]
        let base = nowMilliseconds() - 3_600_000
        // members since before every message (a mention counts for a member at its time, SPEC §4)
        let joins = members.enumerated().map { Events.member("join-\($1)", "member.joined", uid: $1, at: base - 1_000 + Int64($0)) }
            + ["x", "y"].map { Events.member("join2-\($0)", "member.joined", group: "g2", uid: $0, at: base - 1_000) }
        #expect(try app.post(joins, client: client).status == 200)
        #expect(try app.post([
            Events.message("e-p", id: "p", sender: "owner", at: base),
            Events.message("e-q", id: "q", sender: "quoted", at: base + 10),
            Events.message("e-r0", id: "r0", sender: "muted", parent: "p", at: base + 20),
            Events.message("e-r1", id: "r1", sender: "gone", parent: "p", at: base + 30),
        ], client: client).status == 200)
        #expect(try send(app, "PATCH", "/v1/users/prefs/preferences", #"{"groupPreferences": {"replies": "SUBSCRIBE_TO_ALL"}}"#).status == 200)
        #expect(try send(app, "PATCH", "/v1/users/tuned/preferences", #"{"timezone": "Europe/Paris"}"#).status == 200)
        #expect(try send(app, "PUT", "/v1/users/level/conversations/group_g1/level", #"{"level": "all"}"#).status == 200)
        #expect(try send(app, "PUT", "/v1/users/manual/threads/p/subscription", "{}").status == 200)
        let later = nowMilliseconds() + 3_600_000
        #expect(try send(app, "PUT", "/v1/users/muted/mutes", #"{"conversations": [{"id": "g1", "type": "group", "until": \#(later)}]}"#).status == 200)
        #expect(try app.post([Events.member("e-left", "member.left", uid: "gone", at: nowMilliseconds())], client: client).status == 200)

        var reply = Events.message("e-r", id: "r", sender: "replier", parent: "p", at: base + 100, mentions: ["mentioned"])
        var data = reply["data"] as! [String: Any]
        data["quotedMessageId"] = "q"
        data["quotedSender"] = "quoted"
        reply["data"] = data
        // in a batch with a reply of another thread and a reply of another group, which share no set with it
        let others = inBatchWithOthers ? [Events.message("e-s", id: "s", sender: "plain", parent: "q", at: base + 90),
                                          Events.message("e-t", id: "t", sender: "x", group: "g2", at: base + 95)] : []
        #expect(try app.post(others + [reply], client: client).status == 200)

        var jobs: [String: String] = [:]
        for row in try environment.connection().query("SELECT recipient, reason FROM jobs WHERE app = \(app.id) AND message_id = 'r'") {
            jobs[try row.decode(0, as: String.self)] = try row.decode(1, as: String.self)
        }
        #expect(jobs == ["owner": "subscribedThread", "prefs": "allReplies", "level": "allReplies", "mentioned": "mention",
                         "quoted": "quote", "manual": "subscribedThread"])
        if inBatchWithOthers {
            // the other group's top-level message (messages at SUBSCRIBE_TO_ALL) reads its every member in the same statement
            let others = try environment.connection().query("SELECT recipient, reason FROM jobs WHERE app = \(app.id) AND message_id = 't'")
            #expect(try others.map { "\(try $0.decode(0, as: String.self)) \(try $0.decode(1, as: String.self))" } == ["y allMessages"])
        }
        for uid in members where uid != "gone" {
            let explained = try client.get("/v1/users/\(uid)/messages/r/routing", token: app.serverKey)
            #expect(explained.status == 200)
            #expect(explained.json["notified"] as? Bool == (jobs[uid] != nil), "\(uid): \(explained.text)")
        }
    }

    @Test("replies at mentions only: the mentioned are notified, one who joined after the reply too (no subscription row), each reply of a batch its own")
    func mentionedWithoutSubscription() throws {
        let app = try environment.makeApp(prefix: "recipients")
        #expect(try send(app, "PATCH", "/v1/settings/notifications",
                         #"{"groupPreferences":{"replies":{"value":"SUBSCRIBE_TO_MENTIONS"}}}"#).status == 200)
        let base = nowMilliseconds() - 3_600_000
        let early = ["owner", "a", "b", "c", "plain"]
        #expect(try app.post(early.enumerated().map { Events.member("join-\($1)", "member.joined", uid: $1, at: base - 1_000 + Int64($0)) },
                             client: client).status == 200)
        #expect(try app.post([Events.message("e-p", id: "p", sender: "owner", at: base)], client: client).status == 200)
        // joins after the replies: a mention at their time subscribes nobody (SPEC §5.1), yet a
        // member now who is mentioned is notified (SPEC §8.1)
        #expect(try app.post([Events.member("join-late", "member.joined", uid: "late", at: nowMilliseconds())], client: client).status == 200)
        // two replies of one thread in one batch, mentioning different members
        #expect(try app.post([Events.message("e-r1", id: "r1", sender: "a", parent: "p", at: base + 100, mentions: ["late"]),
                              Events.message("e-r2", id: "r2", sender: "b", parent: "p", at: base + 200, mentions: ["c"])],
                             client: client).status == 200)
        var jobs: Set<String> = []
        for row in try environment.connection().query("SELECT message_id, recipient, reason FROM jobs WHERE app = \(app.id) AND message_id IN ('r1', 'r2')") {
            jobs.insert("\(try row.decode(0, as: String.self)) \(try row.decode(1, as: String.self)) \(try row.decode(2, as: String.self))")
        }
        #expect(jobs == ["r1 late mention", "r2 c mention"])
        for (message, uid) in [("r1", "late"), ("r1", "plain"), ("r2", "c"), ("r2", "late")] {
            let explained = try client.get("/v1/users/\(uid)/messages/\(message)/routing", token: app.serverKey)
            #expect(explained.json["notified"] as? Bool == jobs.contains { $0.hasPrefix("\(message) \(uid) ") }, "\(uid) \(message): \(explained.text)")
        }
    }

    @Test("at the spec's limit: a reply mentioning 1,000 members of a 1,001-member group notifies each once; the next reply of the batch nobody")
    func thousandMentions() throws {
        let app = try environment.makeApp(prefix: "recipients")
        #expect(try send(app, "PATCH", "/v1/settings/notifications",
                         #"{"groupPreferences":{"replies":{"value":"SUBSCRIBE_TO_MENTIONS"}}, "largeGroupThreshold": 2000}"#).status == 200)
        let others = (0..<1000).map { "m\($0)" }
        // routed in the ingest transaction (below the large-group threshold); members from now on:
        // the replies' mentions, earlier, subscribe nobody (SPEC §5.1), so each mentioned member is
        // read for its mention alone
        #expect(try app.setMembers("g1", ["owner"] + others, client: client).status == 200)
        let base = nowMilliseconds() - 3_600_000
        #expect(try app.post([Events.message("e-p", id: "p", sender: "owner", at: base)], client: client).status == 200)
        #expect(try app.post([Events.message("e-r1", id: "r1", sender: "owner", parent: "p", at: base + 100, mentions: others),
                              Events.message("e-r2", id: "r2", sender: "owner", parent: "p", at: base + 200)], client: client).status == 200)
        var jobs: [String: [String]] = [:]
        for row in try environment.connection().query("SELECT message_id, recipient, reason FROM jobs WHERE app = \(app.id) AND message_id IN ('r1', 'r2')") {
            jobs[try row.decode(0, as: String.self), default: []].append(try row.decode(1, as: String.self) + " " + (try row.decode(2, as: String.self)))
        }
        #expect(jobs["r1"]?.sorted() == others.map { "\($0) mention" }.sorted())
        #expect(jobs["r2"] == nil)
    }

    /// An app whose group g1 has owner, replier and other, and a thread p (owner's) with a reply
    /// r1 by `replier`, an hour ago (`base`).
    func thread(replier: String) throws -> (app: TestApp, base: Int64) {
        let app = try environment.makeApp(prefix: "recipients")
        let base = nowMilliseconds() - 3_600_000
        #expect(try app.post(["owner", "replier", "other"].map { Events.member("join-\($0)", "member.joined", uid: $0, at: base - 1_000) },
                             client: client).status == 200)
        #expect(try app.post([Events.message("e-p", id: "p", sender: "owner", at: base),
                              Events.message("e-r1", id: "r1", sender: replier, parent: "p", at: base + 10)], client: client).status == 200)
        return (app, base)
    }

    /// Deletes `thread`'s parent p, or its group g1.
    func delete(_ deleted: String, app: TestApp, base: Int64) throws {
        let deletion = deleted == "parent" ? Events.delete("e-d", id: "p", at: base + 20)
                                           : Events.event("e-d", "group.deleted", ["guid": "g1", "at": base + 20])
        #expect(try app.post([deletion], client: client).status == 200)
    }

    /// A reply that arrives after its thread's parent (or its group) was deleted notifies nobody
    /// (the routing reads live messages in live threads only), and explain, which read the
    /// message alone, said it notified: it now reads the same predicate (`Visibility.live`) and
    /// answers 404, as for a deleted message and for a reaction in a deleted thread.
    @Test("a reply arriving in a deleted thread or group makes no job, and explain does not say it notified",
          arguments: ["parent", "group"])
    func deletedThread(deleted: String) throws {
        let (app, base) = try thread(replier: "other")
        try delete(deleted, app: app, base: base)
        #expect(try app.post([Events.message("e-r2", id: "r2", sender: "replier", parent: "p", at: base + 30)], client: client).status == 200)
        let jobs = try environment.connection().query("SELECT recipient FROM jobs WHERE app = \(app.id) AND message_id = 'r2'")
        #expect(jobs.count == 0, "nobody is notified in a deleted thread")
        for uid in ["owner", "other"] {
            let explained = try client.get("/v1/users/\(uid)/messages/r2/routing", token: app.serverKey)
            #expect(explained.status == 404 && explained.errorCode == "ERR_MESSAGE_ID_NOT_FOUND", "\(uid): \(explained.status) \(explained.text)")
        }
    }

    /// An edit that newly mentions someone in a reply whose thread (or group) was deleted wakes
    /// nobody, as the reply itself would not, and updates nobody's push of it (the mention job
    /// and the update were made: `Visibility.undeleted`); explain of the edit is 404 like the message's.
    @Test("an edit mentioning someone in a deleted thread or group makes no job, nor an update of what was pushed", arguments: ["parent", "group"])
    func editInDeletedThread(deleted: String) throws {
        let (app, base) = try thread(replier: "replier")
        // the pushes were claimed: an edit would update r1's, were the thread live
        let claimed = try client.post("/v1/jobs/claim", token: app.workerKey, json: #"{"max": 100}"#).json["jobs"] as? [[String: Any]] ?? []
        #expect(claimed.count == 4, "p to replier and other, r1 to owner and other")
        try delete(deleted, app: app, base: base)
        #expect(try app.post([Events.edit("e-x", id: "r1", sender: "replier", parent: "p", at: base + 30, mentions: ["other"])],
                             client: client).status == 200)
        let jobs = try environment.connection().query("SELECT recipient, kind FROM jobs WHERE app = \(app.id) AND event_id = 'e-x'")
        #expect(jobs.count == 0, "the edit notifies nobody in a deleted thread")
        let explained = try client.get("/v1/users/other/messages/r1/routing?event=chat/e-x", token: app.serverKey)
        #expect(explained.status == 404, "\(explained.status) \(explained.text)")
    }
}
