@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import JSON
import Testing

/// The push templates (SPEC §9, §11.2–11.3): bodies, privacy variants, collapse ids, and the
/// 4 KB bound on what a push carries.
@Suite("Push templates")
struct TemplateTests {
    static func job(reason: String = "allMessages", text: String = "hi", privacy: Bool = false, groupID: String? = "g1",
                    sender: String = "alice", reaction: JobPayload.Reaction? = nil,
                    action: JobPayload.MemberActionFacts? = nil) -> JobPayload {
        var job = JobPayload(id: 7, attempt: 1, app: "acme", recipient: "bob", createdAt: 1, eventSource: "chat", eventID: "e1",
                             eventType: "message.created", reason: reason, devices: [], privacy: privacy, badge: 2, messageID: "m1",
                             conversationID: groupID.map { "group_" + $0 } ?? "alice_user_bob", receiverType: groupID == nil ? "user" : "group",
                             groupID: groupID, sender: sender, sentAt: 1, parentID: nil, text: text, lastError: nil, removal: nil,
                             updates: nil, excludeDevice: nil)
        job.reaction = reaction
        job.memberAction = action
        return job
    }

    static func written(_ job: JobPayload) throws -> JSONValue {
        var writer = JSONWriter()
        job.write(to: &writer)
        return try JSONParser.parse(Array(writer.text.utf8))
    }

    /// The bytes of the job's `notification` and `data`, as a push carries them.
    static func pushBytes(_ job: JobPayload) -> Int {
        var writer = JSONWriter()
        let (title, body) = job.push
        writer.object { job.writePush(to: &$0, title: title, body: body) }
        return writer.text.utf8.count
    }

    @Test("reactions: own message, someone else's, without text, one-on-one, privacy; the reaction's id collapses")
    func reactions() throws {
        let carol = JobPayload.Reaction(id: "r9", reactor: "carol", emoji: "👍")
        let own = Self.job(reason: "reactionOnOwnMessage", reaction: carol)
        #expect(own.kind == .reaction)
        #expect(own.push.title == "carol @ g1" && own.push.body == "carol reacted 👍 to your message: hi")
        #expect(Self.job(reason: "reactionOnMessage", reaction: carol).push.body == "carol reacted 👍 to alice's message: hi")
        #expect(Self.job(reason: "reactionOnOwnMessage", text: "", reaction: carol).push.body == "carol reacted 👍 to your message")
        #expect(Self.job(reason: "reactionOnMessage", text: "", sender: "", reaction: carol).push.body == "carol reacted 👍 to a message")
        #expect(Self.job(reason: "reactionOnOwnMessage", groupID: nil, reaction: carol).push.title == "carol")
        // SPEC §11.2: the privacy body is `New reaction`; the title, which names nobody, the same label
        #expect(Self.job(reason: "reactionOnOwnMessage", privacy: true, reaction: carol).push == ("New reaction", "New reaction"))
        #expect(Self.job(reason: "reactionOnMessage", privacy: true, groupID: nil, reaction: carol).push == ("New reaction", "New reaction"))
        let json = try Self.written(own)
        #expect(json["notification"]?["tag"] == .string("r9") && json["notification"]?["collapseId"] == .string("r9"))
        #expect(json["data"]?["reactionId"] == .string("r9") && json["data"]?["reaction"] == .string("👍")
                    && json["data"]?["messageId"] == .string("m1") && json["data"]?["reactor"] == .string("carol"))
        #expect(try Self.written(Self.job(reason: "reactionOnOwnMessage", groupID: nil, reaction: carol))["data"]?["receiver"] == .string("carol"),
                "one-on-one: the conversation as the recipient sees it, the reactor")
    }

    @Test("member actions: every body with and without an actor, privacy; the group collapses", arguments: [
        (MemberAction.joined, "alice" as String?, nil as String?, "bob joined", "bob joined"),
        (.added, "alice", nil, "alice added bob", "bob was added"),
        (.left, nil, nil, "bob left", "bob left"),
        (.kicked, "alice", nil, "alice removed bob", "bob was removed"),
        (.banned, "alice", nil, "alice banned bob", "bob was banned"),
        (.unbanned, "alice", nil, "alice unbanned bob", "bob was unbanned"),
        (.scopeChanged, "alice", "moderator", "alice made bob a moderator", "bob was made a moderator"),
        (.scopeChanged, "alice", "admin", "alice made bob an admin", "bob was made an admin"),
        (.scopeChanged, "alice", nil, "alice changed bob's scope", "bob's scope was changed"),
    ])
    func memberActions(action: MemberAction, actor: String?, scope: String?, withActor: String, without: String) throws {
        let facts = JobPayload.MemberActionFacts(action: action, uid: "bob", actor: actor, scope: scope, at: 5)
        let job = Self.job(reason: "memberAction", action: facts)
        #expect(job.kind == .memberAction)
        #expect(job.push == ("g1", withActor))
        var passive = facts
        passive.actor = nil
        #expect(Self.job(reason: "memberAction", action: passive).push.body == without)
        // SPEC §11.3: the privacy body is `Group update`; the title, which names nobody, the same label
        #expect(Self.job(reason: "memberAction", privacy: true, action: facts).push == ("Group update", "Group update"))
        let json = try Self.written(job)
        #expect(json["notification"]?["tag"] == .string("g1") && json["notification"]?["collapseId"] == .string("g1"))
        #expect(json["data"]?["action"] == .string(action.rawValue) && json["data"]?["uid"] == .string("bob")
                    && json["data"]?["receiver"] == .string("g1") && json["data"]?["at"] == .int(5))
    }

    @Test("the push stays within 4 KB: the body is cut at a character with '…', the JSON stays whole", arguments: [
        String(repeating: "a", count: 4096),
        String(repeating: "\"", count: 4096),            // escaped to two bytes each
        String(repeating: "\u{1}", count: 4096),         // escaped to six bytes each
        String(repeating: "👍🏽", count: 1024),            // four scalars' worth of bytes per character
        String(repeating: "é", count: 3000) + "\n\t",
    ])
    func bounded(text: String) throws {
        let long = String(repeating: "x", count: 128)
        for job in [Self.job(reason: "mention", text: text, groupID: long, sender: long),
                    Self.job(reason: "reactionOnMessage", text: text, groupID: long, sender: long,
                             reaction: .init(id: long, reactor: long, emoji: "👍"))] {
            let (_, body) = job.push
            #expect(Self.pushBytes(job) <= JobPayload.maxPushBytes)
            #expect(body.hasSuffix("…") && body.count < job.notification.body.count)
            #expect(job.notification.body.hasPrefix(String(body.dropLast())), "a prefix of whole characters")
            _ = try Self.written(job)   // parses
        }
        let short = Self.job(text: "lunch?")
        #expect(short.push.body == "lunch?", "a body that fits is whole")
    }

    @Test("cut keeps whole characters and fits the escaped budget")
    func cut() {
        #expect(JobPayload.cut("hello", toEscapedBytes: 5) == "hello")
        #expect(JobPayload.cut("hello", toEscapedBytes: 4) == "h…")
        #expect(JobPayload.cut("\"\"\"", toEscapedBytes: 5) == "\"…")
        #expect(JobPayload.cut("👍🏽👍🏽", toEscapedBytes: 11) == "👍🏽…", "eight bytes and the ellipsis")
        #expect(JobPayload.cut("👍🏽👍🏽", toEscapedBytes: 10) == "…", "never half a character")
        #expect(JobPayload.cut("abc", toEscapedBytes: 2) == "")
    }

    @Test("a claim's jobs written with the runs their ranges share are byte for byte the jobs written one by one")
    func sharedRuns() {
        // two ranges of one block and a row job between them; reasons, privacy, windows, badges
        // and devices that differ inside a range, a long text that is cut, a reaction row job
        var first = Self.job(reason: "subscribedThread", text: String(repeating: "x", count: 5000) + " \"quoted\"")
        first.id = 2048
        first.parentID = "root"
        first.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        var jobs = [first]
        for (offset, (reason, privacy, opens)) in [("subscribedThread", false, true), ("mention", false, false),
                                                   ("subscribedThread", true, false), ("mention", true, false),
                                                   ("subscribedThread", false, false)].enumerated() {
            var job = first
            job.source = first.id
            job.id = first.id + Int64(offset) + 1
            job.recipient = "u\(offset)"
            job.reason = reason
            job.privacy = privacy
            job.opensDigest = opens
            job.badge = offset == 4 ? 10 : offset   // a cut body depends on the badge's digits
            job.devices = [Device.Target(id: "phone", platform: .apns, token: "t\(offset)", topic: "com.example", sandbox: offset == 2)]
            jobs.append(job)
        }
        var row = Self.job(reason: "reactionOnMessage", reaction: .init(id: "r1", reactor: "carol", emoji: "👍"))
        row.id = 2100
        jobs.append(row)
        var second = Self.job(reason: "allMessages", text: "short", privacy: true)
        second.id = 3072
        jobs.append(second)
        var next = second
        next.source = second.id
        next.id = 3073
        next.privacy = false
        next.excludeDevice = "phone"
        jobs.append(next)

        var shared = JSONWriter()
        JobPayload.write(jobs, to: &shared)
        var plain = JSONWriter()
        plain.array(jobs)
        let (a, b) = (shared.bytes, plain.bytes)
        let same = zip(a, b).prefix { $0 == $1 }.count
        #expect(same == a.count && a.count == b.count,
                "differs at byte \(same): \(String(decoding: a.dropFirst(max(same - 40, 0)).prefix(80), as: UTF8.self)) against \(String(decoding: b.dropFirst(max(same - 40, 0)).prefix(80), as: UTF8.self))")
        #expect(shared.text.contains("\"collapseId\":\"root\""), "a window's opener collapses by thread")
    }
}
