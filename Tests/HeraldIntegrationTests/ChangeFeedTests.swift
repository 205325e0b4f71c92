import Foundation
import HeraldAPI
import HeraldApp
import HeraldDomain
import HeraldStore
import Postgres
import Secrets
import Synchronization
@testable import HeraldTestSupport
import Testing

/// SPEC §14 over HTTP: the per-user change feed — what is in it (and what is not), tombstones,
/// start-now cursors, resuming, refused and expired cursors, long polls woken by NOTIFY, and
/// devices that follow one feed converging.
@Suite("Change feed", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ChangeFeedTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }

    /// A reader of one user's feed that keeps its cursor, as a device does.
    final class Follower {
        let app: TestApp
        let uid: String
        let client: HTTPClient
        var cursor: String

        init(_ app: TestApp, _ uid: String, client: HTTPClient, cursor: String? = nil) throws {
            self.app = app
            self.uid = uid
            self.client = client
            if let cursor {
                self.cursor = cursor
            } else {
                let start = try client.get("/v1/users/\(uid)/changes", token: app.serverKey)
                #expect(start.status == 200, "\(start.text)")
                #expect((start.json["data"] as? [Any])?.isEmpty == true, "without a cursor the feed starts now")
                self.cursor = try #require((start.json["meta"] as? [String: Any])?["next"] as? String)
            }
        }

        /// One page; the cursor moves to its `next`.
        func page(limit: Int = 100, wait: Int? = nil) throws -> (items: [[String: Any]], hasMore: Bool) {
            var path = "/v1/users/\(uid)/changes?limit=\(limit)&cursor=\(cursor)"
            if let wait { path += "&waitSeconds=\(wait)" }
            let response = try client.get(path, token: app.serverKey)
            #expect(response.status == 200, "\(response.text)")
            let meta = response.json["meta"] as? [String: Any]
            cursor = try #require(meta?["next"] as? String, "next is always there")
            return (response.json["data"] as? [[String: Any]] ?? [], meta?["hasMore"] as? Bool ?? false)
        }

        /// Every item there is now, in pages of `limit`.
        func all(limit: Int = 100) throws -> [[String: Any]] {
            var items: [[String: Any]] = []
            while true {
                let page = try page(limit: limit)
                items += page.items
                if !page.hasMore { return items }
            }
        }
    }

    func chat(_ prefix: String) throws -> TestApp {
        let app = try environment.makeApp(prefix: prefix, members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.ingest([Events.message("e1", id: "m1", sender: "alice", at: past, text: "plan"),
                        Events.message("e3", id: "m3", sender: "carol", at: past + 20, text: "lunch")], client: client)
        return app
    }

    func put(_ path: String, _ app: TestApp, _ body: String) throws -> HTTPResult {
        try client.send("PUT", path, token: app.serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    func patch(_ path: String, _ app: TestApp, _ body: String) throws -> HTTPResult {
        try client.send("PATCH", path, token: app.serverKey, headers: ["Content-Type": "application/json"], body: Array(body.utf8))
    }

    static func kinds(_ items: [[String: Any]]) -> [String] { items.map { $0["type"] as? String ?? "?" } }

    /// Items as comparable text (the keys sorted).
    static func texts(_ items: [[String: Any]]) throws -> [String] {
        try items.map { String(decoding: try JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys]), as: UTF8.self) }
    }

    @Test("subscriptions and reads: whatever causes them, with unsubscribe tombstones; others' replies are not there")
    func subscriptionsAndReads() throws {
        let app = try chat("feed-subs")
        let bob = try Follower(app, "bob", client: client)
        let carol = try Follower(app, "carol", client: client)
        // bob's reply subscribes him and moves his read position to it
        try app.ingest([Events.message("e2", id: "r1", sender: "bob", parent: "m1", at: past + 100, text: "agreed")], client: client)
        var items = try bob.all()
        #expect(Self.kinds(items) == ["subscription", "read"])
        #expect(items[0]["parentMessageId"] as? String == "m1" && items[0]["subscribed"] as? Bool == true
                    && items[0]["source"] as? String == "auto" && items[0]["reason"] as? String == "reply"
                    && items[0]["since"] as? Int64 == past + 100 && items[0]["at"] is Int64)
        #expect(items[1]["parentMessageId"] as? String == "m1" && items[1]["readUpTo"] as? String == "r1"
                    && items[1]["unreadReplyCount"] as? Int == 0 && items[1]["unreadMentionCount"] as? Int == 0)
        #expect(try carol.all().isEmpty, "carol's state did not change")
        // a reply by someone else in bob's thread: the inbox has it, the feed does not; carol's
        // mention subscribes her
        try app.ingest([Events.message("e4", id: "r2", sender: "alice", parent: "m1", at: past + 200, text: "@carol?",
                                       mentions: ["carol"])], client: client)
        #expect(try bob.all().isEmpty)
        items = try carol.all()
        #expect(Self.kinds(items).first == "subscription" && items.first?["reason"] as? String == "mention")
        // an explicit unsubscribe is a tombstone; a second one changes nothing; a subscribe is back
        #expect(try client.delete("/v1/users/bob/threads/m1/subscription", token: app.serverKey).status == 200)
        #expect(try client.delete("/v1/users/bob/threads/m1/subscription", token: app.serverKey).status == 200)
        items = try bob.all()
        #expect(Self.kinds(items) == ["subscription"])
        #expect(items.first?["subscribed"] as? Bool == false && items.first?["source"] is NSNull && items.first?["reason"] is NSNull)
        #expect(try put("/v1/users/bob/threads/m1/subscription", app, "{}").status == 200)
        items = try bob.all()
        #expect(Self.kinds(items).first == "subscription" && items.first?["subscribed"] as? Bool == true
                    && items.first?["source"] as? String == "manual")
        // a read
        #expect(try client.post("/v1/users/carol/threads/m1/read", token: app.serverKey, json: #"{"messageId": "r2"}"#).status == 200)
        items = try carol.all()
        #expect(Self.kinds(items) == ["read"] && items.first?["readUpTo"] as? String == "r2" && items.first?["unreadReplyCount"] as? Int == 0)
    }

    @Test("pins reach every member, saves the saver, conversation pins their owner (a system pin everyone); tombstones")
    func pinsAndSaves() throws {
        let app = try chat("feed-pins")
        let followers = try ["alice", "bob", "carol"].map { try Follower(app, $0, client: client) }
        try app.ingest([PinsTests.pin("p1", "m1", by: "alice", at: past + 100)], client: client)
        for follower in followers {
            let items = try follower.all()
            #expect(Self.kinds(items) == ["messagePin"], "\(follower.uid)")
            #expect(items.first?["messageId"] as? String == "m1" && items.first?["conversationId"] as? String == "group_g1"
                        && items.first?["pinnedAt"] as? Int64 == past + 100 && items.first?["pinnedBy"] as? String == "alice")
        }
        // an older unpin changes no state: nothing; a newer one is a tombstone
        try app.ingest([PinsTests.pin("p0", "m1", by: "bob", at: past + 50, pinned: false)], client: client)
        #expect(try followers[1].all().isEmpty)
        try app.ingest([PinsTests.pin("p2", "m1", by: "bob", at: past + 200, pinned: false)], client: client)
        for follower in followers {
            let unpinned = try follower.all()
            #expect(Self.kinds(unpinned) == ["messagePin"] && unpinned.first?["pinnedAt"] as? Int == 0 && unpinned.first?["pinnedBy"] is NSNull,
                    "\(follower.uid)")
        }
        // a save: the saver only
        try app.ingest([PinsTests.save("s1", "m3", uid: "bob", at: past + 300)], client: client)
        var items = try followers[1].all().filter { $0["type"] as? String == "save" }
        #expect(items.count == 1 && items.first?["messageId"] as? String == "m3" && items.first?["savedAt"] as? Int64 == past + 300)
        try app.ingest([PinsTests.save("s2", "m3", uid: "bob", at: past + 400, saved: false)], client: client)
        items = try followers[1].all()
        #expect(Self.kinds(items) == ["save"] && items.first?["savedAt"] as? Int == 0)
        #expect(try followers[2].all().isEmpty && followers[0].all().isEmpty)
        // a conversation pin: its owner; a system pin: every participant
        try app.ingest([PinsTests.conversationPin("c1", uid: "carol", at: past + 500)], client: client)
        items = try followers[2].all()
        #expect(Self.kinds(items) == ["conversationPin"] && items.first?["conversationId"] as? String == "group_g1"
                    && items.first?["pinnedAt"] as? Int64 == past + 500 && items.first?["pinnedBy"] as? String == "carol")
        #expect(try followers[0].all().isEmpty)
        try app.ingest([PinsTests.conversationPin("c2", uid: "app_system", at: past + 600)], client: client)
        for follower in followers {
            let items = try follower.all()
            #expect(Self.kinds(items) == ["conversationPin"] && items.first?["pinnedBy"] as? String == "app_system", "\(follower.uid)")
        }
        // the switch turns off sync jobs, not the feed
        _ = try patch("/v1/settings/notifications", app, #"{"syncJobs": false}"#)
        try app.ingest([PinsTests.pin("p3", "m3", by: "carol", at: past + 700)], client: client)
        #expect(Self.kinds(try followers[0].all()) == ["messagePin"])
    }

    @Test("preferences, mutes and devices: one item a change, a token that moves is removed from one user and added to the other")
    func preferencesMutesDevices() throws {
        let app = try environment.makeApp(prefix: "feed-user")
        let bob = try Follower(app, "bob", client: client)
        let carol = try Follower(app, "carol", client: client)
        #expect(try patch("/v1/users/bob/preferences", app, #"{"timezone": "Europe/Paris"}"#).status == 200)
        let later = nowMilliseconds() + 3_600_000
        #expect(try put("/v1/users/bob/mutes", app,
                        #"{"conversations": [{"id": "g1", "type": "group", "until": \#(later)}, {"id": "alice", "type": "oneOnOne", "until": \#(later)}]}"#).status == 200)
        var items = try bob.all()
        #expect(Self.kinds(items) == ["preferences", "mutes"], "two mutes in one call: one item")
        #expect(try put("/v1/users/bob/devices/phone", app, #"{"platform": "fcm", "token": "tok-1"}"#).status == 200)
        #expect(try put("/v1/users/bob/devices/phone", app, #"{"platform": "fcm", "token": "tok-1"}"#).status == 200)
        items = try bob.all()
        #expect(Self.kinds(items) == ["device"], "registering the same device again changes nothing")
        #expect(items.first?["deviceId"] as? String == "phone" && items.first?["removed"] as? Bool == false)
        // the token registered under carol moves there
        #expect(try put("/v1/users/carol/devices/tablet", app, #"{"platform": "fcm", "token": "tok-1"}"#).status == 200)
        items = try bob.all()
        #expect(Self.kinds(items) == ["device"] && items.first?["removed"] as? Bool == true)
        items = try carol.all()
        #expect(Self.kinds(items) == ["device"] && items.first?["deviceId"] as? String == "tablet" && items.first?["removed"] as? Bool == false)
        #expect(try client.delete("/v1/users/carol/devices/tablet", token: app.serverKey).status == 204)
        #expect(try carol.all().first?["removed"] as? Bool == true)
        // the /v1/me mirror answers the same feed (a user token is tested in UserTokenTests)
        #expect(try client.get("/v1/users/carol/changes?cursor=\(carol.cursor)", token: app.serverKey).status == 200)
    }

    @Test("cursors: resume exactly after the last item; garbage, altered or another user's → 400; past the retention → 410, and purged")
    func cursors() throws {
        let app = try environment.makeApp(prefix: "feed-cursor")
        let start = try Follower(app, "bob", client: client)
        for index in 0..<7 {
            #expect(try put("/v1/users/bob/devices/d\(index)", app, #"{"platform": "fcm", "token": "tok-\#(index)"}"#).status == 200)
        }
        let whole = try Follower(app, "bob", client: client, cursor: start.cursor).all()
        #expect(whole.count == 7 && whole.map { $0["deviceId"] as? String } == (0..<7).map { "d\($0)" })
        // pages of 3, with a consumer that restarts from its last cursor after each page
        var seen: [[String: Any]] = []
        var cursor = start.cursor
        while true {
            let follower = try Follower(app, "bob", client: client, cursor: cursor)
            let page = try follower.page(limit: 3)
            seen += page.items
            cursor = follower.cursor
            if !page.hasMore { break }
        }
        #expect(try Self.texts(seen) == Self.texts(whole), "each change once, in order")
        #expect(try Follower(app, "bob", client: client, cursor: cursor).all().isEmpty)
        // refused cursors
        for bad in ["garbage!", String(start.cursor.dropLast(2)) + "AA", "Y2hhbmdlcx8xHzIfMw"] {
            let response = try client.get("/v1/users/bob/changes?cursor=\(bad)", token: app.serverKey)
            #expect(response.status == 400 && response.errorCode == "ERR_BAD_REQUEST" && response.errorParams["field"] as? String == "cursor", "\(bad)")
        }
        let other = try client.get("/v1/users/carol/changes?cursor=\(start.cursor)", token: app.serverKey)
        #expect(other.status == 400 && other.errorParams["field"] as? String == "cursor", "another user's cursor")
        #expect(try client.get("/v1/users/bob/changes?cursor=\(start.cursor)&limit=0", token: app.serverKey).errorCode == "ERR_INVALID_LIMIT")
        // a cursor older than the retention (signed as the server signs, with an old time)
        let key = Secrets.sha256("herald cursor key:" + TestEnvironment.adminToken)
        let binding = Secrets.hex(Array(Secrets.sha256(app.id + "\u{1F}bob").prefix(8)))
        let old = Cursor.encode(kind: "changes", [binding, "0", String(nowMilliseconds() - 604_801_000)], key: key)
        let expired = try client.get("/v1/users/bob/changes?cursor=\(old)", token: app.serverKey)
        #expect(expired.status == 410 && expired.errorCode == "ERR_CURSOR_EXPIRED", "\(expired.text)")
        let fresh = Cursor.encode(kind: "changes", [binding, "0", String(nowMilliseconds() - 60_000)], key: key)
        #expect(try client.get("/v1/users/bob/changes?cursor=\(fresh)", token: app.serverKey).status == 200, "the signing above is the server's")
        // a shorter retention: that cursor is expired too, and maintenance purges what is past it
        _ = try patch("/v1/settings/notifications", app, #"{"changeRetentionSeconds": 60}"#)
        #expect(try client.get("/v1/users/bob/changes?cursor=\(fresh)", token: app.serverKey).status == 410)
        let connection = try environment.connection()
        try connection.query("UPDATE changes SET at = at - 121000 WHERE app = \(app.id) AND subject IN ('d0', 'd1')")
        _ = try environment.server.maintenance.purgeChanges()
        let left = try connection.query("SELECT subject FROM changes WHERE app = \(app.id) ORDER BY seq").map { try $0.decode(0, as: String.self) }
        #expect(left == (2..<7).map { "d\($0)" })
    }

    @Test("waitSeconds: a long poll answers when a change commits, on this instance or from elsewhere; 0–30")
    func longPoll() throws {
        let app = try environment.makeApp(prefix: "feed-wait")
        let bob = try Follower(app, "bob", client: client)
        let cursor = bob.cursor
        let client = self.client
        let serverKey = app.serverKey
        // woken by a change made through Herald
        let waiting = Thread.detachNewThreadResult { () -> [String] in
            let response = try? client.get("/v1/users/bob/changes?waitSeconds=20&cursor=\(cursor)", token: serverKey)
            return ((response?.json["data"] as? [[String: Any]]) ?? []).compactMap { $0["deviceId"] as? String }
        }
        Thread.sleep(forTimeInterval: 0.3)
        #expect(try put("/v1/users/bob/devices/phone", app, #"{"platform": "fcm", "token": "tok-w"}"#).status == 200)
        #expect(waiting.wait(seconds: 25) == ["phone"])
        // woken by a change committed by another process (only NOTIFY can tell this instance)
        let after = try Follower(app, "bob", client: client, cursor: cursor)
        _ = try after.all()
        let next = after.cursor
        let elsewhere = Thread.detachNewThreadResult { () -> [String] in
            let response = try? client.get("/v1/users/bob/changes?waitSeconds=20&cursor=\(next)", token: serverKey)
            return ((response?.json["data"] as? [[String: Any]]) ?? []).compactMap { $0["deviceId"] as? String }
        }
        Thread.sleep(forTimeInterval: 0.3)
        try environment.connection().query("""
            INSERT INTO devices (app, uid, id, platform, token) VALUES (\(app.id), 'bob', 'laptop', 'webpush', 'tok-x')
            """)
        #expect(elsewhere.wait(seconds: 25) == ["laptop"])
        #expect(try after.all().compactMap { $0["deviceId"] as? String } == ["laptop"])
        // nothing comes: an empty page with a cursor that still works
        let idle = try client.get("/v1/users/bob/changes?waitSeconds=1&cursor=\(after.cursor)", token: app.serverKey)
        #expect(idle.status == 200 && (idle.json["data"] as? [Any])?.isEmpty == true
                    && (idle.json["meta"] as? [String: Any])?["hasMore"] as? Bool == false)
        for bad in ["31", "-1", "x"] {
            let response = try client.get("/v1/users/bob/changes?waitSeconds=\(bad)&cursor=\(after.cursor)", token: app.serverKey)
            #expect(response.status == 400 && response.errorCode == "ERR_INVALID_LIMIT" && response.errorParams["field"] as? String == "waitSeconds")
        }
    }

    @Test("a job long poll is woken by jobs another process adds (NOTIFY herald_jobs), not by polling")
    func jobLongPollNotified() throws {
        let app = try chat("feed-jobs")
        _ = try app.claimAll(client: client)
        let client = self.client
        let workerKey = app.workerKey
        let waiting = Thread.detachNewThreadResult { () -> [String] in
            let response = try? client.post("/v1/jobs/claim", token: workerKey, json: #"{"waitSeconds": 20, "max": 10}"#)
            return ((response?.json["jobs"] as? [[String: Any]]) ?? []).compactMap { $0["recipient"] as? String }
        }
        Thread.sleep(forTimeInterval: 0.5)
        try environment.connection().query("""
            INSERT INTO job_rows (app, message_id, recipient, reason) VALUES (\(app.id), 'm1', 'zed', 'groupMessage')
            """)
        #expect(waiting.wait(seconds: 25) == ["zed"])
    }

    /// A device's view of what the feed carries.
    struct Model: Equatable {
        var subscribed: [String: Bool] = [:]
        var pinnedAt: [String: Int64] = [:]
        var savedAt: [String: Int64] = [:]
        var conversationPinnedAt: [String: Int64] = [:]

        mutating func apply(_ item: [String: Any]) {
            switch item["type"] as? String {
            case "subscription": subscribed[item["parentMessageId"] as? String ?? ""] = item["subscribed"] as? Bool ?? false
            case "messagePin": pinnedAt[item["messageId"] as? String ?? ""] = (item["pinnedAt"] as? NSNumber)?.int64Value ?? -1
            case "save": savedAt[item["messageId"] as? String ?? ""] = (item["savedAt"] as? NSNumber)?.int64Value ?? -1
            case "conversationPin":
                conversationPinnedAt[item["conversationId"] as? String ?? ""] = (item["pinnedAt"] as? NSNumber)?.int64Value ?? -1
            default: break
            }
        }
    }

    /// The state as the server answers it now.
    func state(_ app: TestApp) throws -> Model {
        var model = Model()
        for thread in ["m1", "m3"] {
            let response = try client.get("/v1/users/bob/threads/\(thread)/subscription", token: app.serverKey)
            model.subscribed[thread] = response.json["subscribed"] as? Bool ?? false
        }
        let lookup = try client.post("/v1/users/bob/messages/lookup", token: app.serverKey, json: #"{"messageIds": ["m1", "m3"]}"#)
        for (id, value) in lookup.json["data"] as? [String: [String: Any]] ?? [:] {
            model.pinnedAt[id] = (value["pinnedAt"] as? NSNumber)?.int64Value ?? -1
            model.savedAt[id] = (value["savedAt"] as? NSNumber)?.int64Value ?? -1
        }
        let pins = try client.get("/v1/users/bob/pinned-conversations", token: app.serverKey)
        model.conversationPinnedAt["group_g1"] = 0
        for item in pins.json["data"] as? [[String: Any]] ?? [] where item["pinnedBy"] as? String == "bob" {
            model.conversationPinnedAt[item["conversationId"] as? String ?? ""] = (item["pinnedAt"] as? NSNumber)?.int64Value ?? -1
        }
        return model
    }

    @Test("two devices following one feed converge after any interleaving of calls and events; a restarted consumer sees each change once")
    func convergence() throws {
        let app = try chat("feed-converge")
        let start = try Follower(app, "bob", client: client)
        let startCursor = start.cursor
        let client = self.client
        let past = self.past
        let serverKey = app.serverKey
        let ingestKey = app.ingestKey
        // two writers at once: explicit calls and events on bob's subscriptions, pins and saves
        let writers = (0..<2).map { writer in
            Thread.detachNewThreadResult { () -> Bool in
                var random = SystemRandomNumberGenerator()
                for step in 0..<30 {
                    let thread = Bool.random(using: &random) ? "m1" : "m3"
                    let at = past + 1000 + Int64.random(in: 0..<5000, using: &random)
                    let id = "w\(writer)-\(step)"
                    let body: String
                    switch Int.random(in: 0..<6, using: &random) {
                    case 0: _ = try? client.send("PUT", "/v1/users/bob/threads/\(thread)/subscription", token: serverKey,
                                                 headers: ["Content-Type": "application/json"], body: Array("{}".utf8)); continue
                    case 1: _ = try? client.delete("/v1/users/bob/threads/\(thread)/subscription", token: serverKey); continue
                    case 2: body = Events.json([Events.message(id, id: "r-\(id)", sender: Bool.random() ? "bob" : "alice", parent: thread,
                                                               at: at, text: "@bob", mentions: ["bob"])])
                    case 3: body = Events.json([PinsTests.pin(id, thread, by: "alice", at: at, pinned: Bool.random(using: &random))])
                    case 4: body = Events.json([PinsTests.save(id, thread, uid: "bob", at: at, saved: Bool.random(using: &random))])
                    default: body = Events.json([PinsTests.conversationPin(id, uid: "bob", at: at, pinned: Bool.random(using: &random))])
                    }
                    guard let response = try? client.send("POST", "/v1/events", token: ingestKey,
                                                          headers: ["Content-Type": "application/cloudevents-batch+json"], body: Array(body.utf8)),
                          response.status == 200 else { return false }
                }
                return true
            }
        }
        // device A follows from the start in small pages while the writers run; device B starts
        // midway: a cursor first, then the state, then the feed
        let deviceA = try Follower(app, "bob", client: client, cursor: startCursor)
        var modelA = try state(app)   // nothing happened before the start cursor but the two messages
        var everything: [[String: Any]] = []
        for _ in 0..<5 { for item in try deviceA.page(limit: 3).items { modelA.apply(item); everything.append(item) } }
        let deviceB = try Follower(app, "bob", client: client)
        var modelB = try state(app)
        for writer in writers { #expect(writer.wait(seconds: 120) == true, "every event was accepted") }
        // device A stops and restarts from its last cursor
        let restartedA = try Follower(app, "bob", client: client, cursor: deviceA.cursor)
        for item in try restartedA.all(limit: 4) { modelA.apply(item); everything.append(item) }
        for item in try deviceB.all(limit: 7) { modelB.apply(item) }
        let server = try state(app)
        #expect(modelA == server, "device A converged")
        #expect(modelB == server, "device B converged")
        let once = try Follower(app, "bob", client: client, cursor: startCursor).all(limit: 1000)
        #expect(try Self.texts(everything) == Self.texts(once), "the restarted consumer saw each change once, in order")
        #expect(!once.isEmpty)
    }
}
