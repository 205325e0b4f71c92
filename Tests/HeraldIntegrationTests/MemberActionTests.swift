import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §11.3 over HTTP: a member event that changes current membership, and every unban and
/// scope change, notify the members whose preference for that action is SUBSCRIBE, except its
/// subject and actor; superseded, repeated, snapshot and stale evidence notify nobody.
@Suite("Member actions", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct MemberActionTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }
    let past = nowMilliseconds() - 3_600_000

    init() throws {
        environment = try TestEnvironment.shared()
    }



    func recipients(_ jobs: [[String: Any]]) -> Set<String> { Set(jobs.compactMap { $0["recipient"] as? String }) }

    func body(_ job: [String: Any]?) -> String? { (job?["notification"] as? [String: Any])?["body"] as? String }

    @Test("an app default of SUBSCRIBE notifies every member but the subject and the actor; the job's template and data")
    func appDefault() throws {
        let app = try environment.makeApp(prefix: "members", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.patch("/v1/settings/notifications", #"{"groupPreferences": {"memberAdded": {"value": "SUBSCRIBE", "userCanOverride": true}, "memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}}}"#, client: client)
        try app.ingest([Events.member("a1", "member.added", uid: "eve", at: past, actor: "alice")], client: client)
        let jobs = try app.claimAll(client: client)
        #expect(recipients(jobs) == ["bob", "carol"], "not eve (the subject), not alice (the actor)")
        let job = try #require(jobs.first)
        #expect(job["kind"] as? String == "memberAction" && job["reason"] as? String == "memberAction")
        let notification = try #require(job["notification"] as? [String: Any])
        #expect(notification["title"] as? String == "g1" && notification["body"] as? String == "alice added eve")
        #expect(notification["tag"] as? String == "g1" && notification["collapseId"] as? String == "g1")
        let data = try #require(job["data"] as? [String: Any])
        #expect(data["action"] as? String == "memberAdded" && data["uid"] as? String == "eve" && data["actor"] as? String == "alice"
                    && data["receiver"] as? String == "g1" && data["conversationId"] as? String == "group_g1")
        #expect((job["event"] as? [String: Any])?["id"] as? String == "a1")

        // already a member: a later join changes nothing and notifies nobody; redelivery neither
        try app.ingest([Events.member("a2", "member.joined", uid: "eve", at: past + 10)], client: client)
        try app.ingest([Events.member("a1", "member.added", uid: "eve", at: past, actor: "alice")], client: client, accepted: 0)
        #expect(try app.claimAll(client: client).isEmpty)
        // a snapshot that adds frank notifies nobody
        #expect(try app.setMembers("g1", ["alice", "bob", "carol", "eve", "frank"], client: client).status == 200)
        #expect(try app.claimAll(client: client).isEmpty)
    }

    @Test("default DONT_SUBSCRIBE: only users who chose SUBSCRIBE for that action; mutes and DND apply")
    func userChoice() throws {
        let app = try environment.makeApp(prefix: "members", members: ["alice", "bob", "carol", "dave", "eve", "frank"], joinedAt: past - 100_000)
        for uid in ["bob", "carol", "dave"] {
            try app.patch("/v1/users/\(uid)/preferences", #"{"groupPreferences": {"memberKicked": "SUBSCRIBE"}}"#, client: client)
        }
        try app.patch("/v1/users/dave/preferences", #"{"mutePreferences": {"dnd": "ENABLED"}}"#, client: client)
        let muted = try client.send("PUT", "/v1/users/carol/mutes", token: app.serverKey, headers: ["Content-Type": "application/json"],
                                    body: Array(#"{"conversations": [{"id": "g1", "type": "group", "until": \#(nowMilliseconds() + 600_000)}]}"#.utf8))
        #expect(muted.status == 200)
        try app.ingest([Events.member("k1", "member.kicked", uid: "eve", at: past, actor: "alice"),
                        Events.member("l1", "member.left", uid: "frank", at: past + 1)], client: client)
        let jobs = try app.claimAll(client: client)
        #expect(recipients(jobs) == ["bob"], "carol muted the group, dave has DND, the others left it at DONT_SUBSCRIBE")
        #expect(body(jobs.first) == "alice removed eve")
        #expect(jobs.count == 1, "memberLeft stays DONT_SUBSCRIBE for everyone")
    }

    @Test("superseded evidence notifies nobody: a removal after a join that arrives first; order of arrival does not matter")
    func superseded() throws {
        let app = try environment.makeApp(prefix: "members", members: ["alice", "bob"], joinedAt: past - 100_000)
        try app.patch("/v1/settings/notifications",
                  #"{"groupPreferences": {"memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}, "memberLeft": {"value": "SUBSCRIBE", "userCanOverride": true}, "memberBanned": {"value": "SUBSCRIBE", "userCanOverride": true}}}"#, client: client)
        // eve leaves at t+20, and the join at t+10 arrives afterwards: she is not a member
        try app.ingest([Events.member("x1", "member.left", uid: "eve", at: past + 20)], client: client)
        try app.ingest([Events.member("x2", "member.joined", uid: "eve", at: past + 10)], client: client)
        #expect(try app.claimAll(client: client).isEmpty, "the left came while eve was no member; the join is older than it")
        // the same evidence in one batch: nothing either
        try app.ingest([Events.member("y1", "member.joined", uid: "frank", at: past + 10),
                        Events.member("y2", "member.left", uid: "frank", at: past + 20)], client: client)
        #expect(try app.claimAll(client: client).isEmpty)
        // a message from ida, then her join, in one batch: the message made her a member first
        try app.ingest([Events.message("y3", id: "m-ida", sender: "ida", at: past + 25),
                        Events.member("y4", "member.joined", uid: "ida", at: past + 26)], client: client)
        #expect(try app.claimAll(client: client).allSatisfy { $0["kind"] as? String != "memberAction" })
        // a join then a ban, one batch each: two notices
        try app.ingest([Events.member("z1", "member.joined", uid: "gina", at: past + 30)], client: client)
        #expect(body(try app.claimAll(client: client).first) == "gina joined")
        try app.ingest([Events.member("z2", "member.banned", uid: "gina", at: past + 40)], client: client)
        let banned = try app.claimAll(client: client)
        #expect(recipients(banned) == ["alice", "bob", "ida"] && body(banned.first) == "gina was banned")
        // a join and a removal at the same time: the removal wins, so nothing changed
        try app.ingest([Events.member("w1", "member.joined", uid: "hal", at: past + 50),
                        Events.member("w2", "member.banned", uid: "hal", at: past + 50)], client: client)
        #expect(try app.claimAll(client: client).isEmpty)
    }

    @Test("unbanned and scopeChanged always count; the scope's template; stale events and deleted groups notify nobody")
    func noticesAndStale() throws {
        let app = try environment.makeApp(prefix: "members", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.patch("/v1/settings/notifications",
                  #"{"groupPreferences": {"memberScopeChanged": {"value": "SUBSCRIBE", "userCanOverride": true}, "memberUnbanned": {"value": "SUBSCRIBE", "userCanOverride": true}, "memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}}}"#, client: client)
        try app.ingest([Events.member("s1", "member.scopeChanged", uid: "bob", at: past, actor: "alice", scope: "moderator")], client: client)
        let scope = try app.claimAll(client: client)
        #expect(recipients(scope) == ["carol"] && body(scope.first) == "alice made bob a moderator")
        try app.ingest([Events.member("s2", "member.scopeChanged", uid: "bob", at: past + 1, scope: "admin"),
                        Events.member("u1", "member.unbanned", uid: "zed", at: past + 2)], client: client)
        let notices = try app.claimAll(client: client)
        #expect(Set(notices.compactMap(body)) == ["bob was made an admin", "zed was unbanned"], "\(notices.compactMap(body))")
        let bad = try app.post([Events.member("s3", "member.scopeChanged", uid: "bob", at: past + 3, scope: "owner")], client: client)
        #expect(((bad.json["results"] as? [[String: Any]])?.first?["error"] as? [String: Any]).flatMap { ($0["params"] as? [String: Any])?["field"] as? String } == "data.scope")

        try app.ingest([Events.member("o1", "member.joined", uid: "old", at: nowMilliseconds() - 2 * 86_400_000)], client: client)
        #expect(try app.claimAll(client: client).isEmpty, "stale")
        #expect(try client.get("/v1/groups/g1/members?limit=100", token: app.serverKey).text.contains("\"old\""), "the state still changed")

        try app.patch("/v1/settings/notifications", #"{"privacyTemplateMode": "PRIVACY"}"#, client: client)
        try app.ingest([Events.member("p1", "member.joined", uid: "pia", at: past + 5)], client: client)
        let privacy = try app.claimAll(client: client)
        #expect((privacy.first?["notification"] as? [String: Any])?["title"] as? String == "Group update")
        #expect(body(privacy.first) == "Group update", "SPEC §11.3: the privacy body")
        // a notice nobody claimed yet is cancelled with its group
        try app.ingest([Events.member("q1", "member.joined", uid: "quin", at: past + 5)], client: client)
        try app.ingest([Events.event("gd", "group.deleted", ["guid": "g1", "at": past + 6]),
                        Events.member("u2", "member.unbanned", uid: "zed", at: past + 7)], client: client)
        #expect(try app.claimAll(client: client).isEmpty, "a deleted group notifies nobody")
    }

    @Test("maintenance forgets what a member action said once its jobs are gone, and not before")
    func retention() throws {
        let app = try environment.makeApp(prefix: "members", members: ["alice", "bob", "carol"], joinedAt: past - 100_000)
        try app.patch("/v1/settings/notifications", #"{"groupPreferences": {"memberJoined": {"value": "SUBSCRIBE", "userCanOverride": true}}}"#, client: client)
        try app.ingest([Events.member("j1", "member.joined", uid: "eve", at: past), Events.member("j2", "member.joined", uid: "fay", at: past + 1)],
                       client: client)
        let connection = try environment.connection()
        // eve's jobs were delivered long ago; fay's still wait
        let eve = try app.claimAll(client: client).filter { ($0["event"] as? [String: Any])?["id"] as? String == "j1" }
        #expect(!eve.isEmpty)
        try connection.query("UPDATE job_rows SET state = 'ready' WHERE app = \(app.id) AND event_id = 'j2'")
        try connection.query("UPDATE job_rows SET created_at = herald_now_ms() - 8 * 86400000 WHERE app = \(app.id) AND event_id = 'j1'")
        try connection.query("UPDATE member_actions SET created_at = herald_now_ms() - 8 * 86400000 WHERE app = \(app.id)")
        try environment.server.maintenance.runOnce()
        let left = try connection.query("SELECT event_id FROM member_actions WHERE app = \(app.id) ORDER BY 1")
        #expect(try left.map { try $0.decode(0, as: String.self) } == ["j2"])
    }
}
