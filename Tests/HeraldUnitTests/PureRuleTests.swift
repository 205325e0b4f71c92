@testable import HeraldDomain
@testable import HeraldStore
import HTTPTypes
import JSON
import Testing

/// The pure parts of ingest, membership actions, pins and locks, without a database: what the
/// layers let a test reach directly.
@Suite("Pure rules")
struct PureRuleTests {
    static func body(_ json: String) -> [UInt8] { Array(json.utf8) }

    @Test("EventParser: structured, batch and binary modes; a bad event is rejected alone, a bad body as a whole")
    func eventParser() throws {
        let message = #"{"specversion":"1.0","id":"e1","source":"s","type":"message.created","data":{"id":"m1","conversationId":"group_g","receiverType":"group","receiver":"g","sender":"alice","sentAt":1000}}"#
        let one = try EventParser.parse(body: Self.body(message), mediaType: "application/cloudevents+json", header: { _ in nil })
        guard case .valid(let event, _) = one[0], case .messageCreated(let m) = event.event else {
            Issue.record("not a message: \(one)")
            return
        }
        #expect(event.id == "e1" && m.id == "m1" && m.sender == "alice" && m.conversation.groupID == "g")

        let batch = try EventParser.parse(body: Self.body("[\(message), {\"id\": \"x\"}]"), mediaType: "application/json", header: { _ in nil })
        #expect(batch.count == 2)
        guard case .rejected(let rejection, _, let id, _, _) = batch[1] else {
            Issue.record("the second event must be rejected alone")
            return
        }
        #expect(id == "x" && rejection.code == "ERR_BAD_REQUEST")

        #expect(throws: HTTPError.self) { try EventParser.parse(body: Self.body("{"), mediaType: "application/json", header: { _ in nil }) }
        #expect(throws: HTTPError.self) { try EventParser.parse(body: Self.body("3"), mediaType: "application/json", header: { _ in nil }) }
        let tooMany = "[" + Array(repeating: message, count: EventParser.maxBatch + 1).joined(separator: ",") + "]"
        #expect(throws: HTTPError.self) { try EventParser.parse(body: Self.body(tooMany), mediaType: "application/json", header: { _ in nil }) }

        // binary mode: the attributes in ce- headers, the body is data
        let headers = ["ce-specversion": "1.0", "ce-id": "e2", "ce-source": "s", "ce-type": "message.created"]
        let data = #"{"id":"m2","conversationId":"group_g","receiverType":"group","receiver":"g","sender":"bob","sentAt":1000}"#
        let binary = try EventParser.parse(body: Self.body(data), mediaType: "application/json", header: { headers[$0] })
        guard case .valid(let event2, _) = binary[0], case .messageCreated(let m2) = event2.event else {
            Issue.record("binary mode: \(binary)")
            return
        }
        #expect(event2.id == "e2" && m2.id == "m2")
        let broken = try EventParser.parse(body: Self.body("{"), mediaType: "application/json", header: { headers[$0] })
        guard case .rejected(let why, _, _, _, _) = broken[0] else {
            Issue.record("binary mode with bad data must be rejected")
            return
        }
        #expect(why.field == "data")
    }

    static func item(_ id: String, _ group: String, _ uid: String, at: Int64, joined: Bool) -> MemberActionJobs.Item {
        let change = DomainEvent.MembershipChange(guid: group, uid: uid, at: at, joined: joined, action: joined ? .joined : .left)
        return MemberActionJobs.Item(event: IncomingEvent(source: "s", id: id, type: joined ? "member.joined" : "member.left",
                                                          event: .membership(change)),
                                     change: change)
    }

    @Test("MemberActionJobs.changing: only an event that changed membership notifies, the earliest of a key once")
    func memberActionsChanging() {
        let key = MemberActionJobs.key(group: "g", uid: "u")
        let joins = [Self.item("a", "g", "u", at: 20, joined: true), Self.item("b", "g", "u", at: 10, joined: true)]
        // not a member before, a member after: the earliest join of the two notifies
        let chosen = MemberActionJobs.changing(joins, before: [:], after: [key: (joined: 20, removed: nil)])
        #expect(chosen.map(\.event.id) == ["b"])
        // a member before already: nothing changed, nothing notifies
        #expect(MemberActionJobs.changing(joins, before: [key: (joined: 5, removed: nil)], after: [key: (joined: 20, removed: nil)]).isEmpty)
        // a leave that a later join outranks: still a member, nothing notifies
        let leave = [Self.item("c", "g", "u", at: 15, joined: false)]
        #expect(MemberActionJobs.changing(leave, before: [key: (joined: 5, removed: nil)], after: [key: (joined: 20, removed: 15)]).isEmpty)
        // a leave that stands
        #expect(MemberActionJobs.changing(leave, before: [key: (joined: 5, removed: nil)], after: [key: (joined: 5, removed: 15)])
            .map(\.event.id) == ["c"])
        // a join after which the user had already sent a message (a member since then): not news
        #expect(MemberActionJobs.changing([joins[0]], before: [:], after: [key: (joined: 20, removed: nil)], sentBy: [key: 12]).isEmpty)
    }

    @Test("PinStore.deciding: the latest event of a key wins; on a tie an unpin, then the greater tie in byte order")
    func pinsDeciding() {
        typealias Event = (key: String, at: Int64, set: Bool, tie: String?)
        func decide(_ events: [Event]) -> [Event] {
            PinStore.deciding(events, key: { Array($0.key.utf8) }, at: \.at, sets: \.set, tie: \.tie)
        }
        #expect(decide([("k", 1, true, "a"), ("k", 2, false, "a")]).map(\.at) == [2])
        #expect(decide([("k", 2, true, "a"), ("k", 1, false, "a")]).map(\.set) == [true])
        #expect(decide([("k", 2, true, "z"), ("k", 2, false, "a")]).map(\.set) == [false], "an unpin wins a tie")
        #expect(decide([("k", 2, true, "b"), ("k", 2, true, "é"), ("k", 2, true, "c")]).map(\.tie) == ["é"], "bytes, not characters")
        #expect(decide([("k", 1, true, nil), ("j", 1, true, nil), ("k", 3, true, nil)]).map(\.key) == ["k", "j"], "keys in first-seen order")
    }

    @Test("LockSet.missing: what another set needs that this one does not hold; an exclusive lock covers a shared one")
    func lockSetMissing() {
        var held = LockSet()
        held.thread("t1", group: "g")
        var needed = LockSet()
        needed.thread("t1", group: "g")
        #expect(held.missing(from: needed).isEmpty)
        needed.group("g")
        #expect(!held.missing(from: needed).isEmpty, "the group exclusively is more than shared")
        var exclusive = LockSet()
        exclusive.group("g")
        exclusive.thread("t1", group: nil)
        var shared = LockSet()
        shared.thread("t1", group: "g")
        #expect(exclusive.missing(from: shared).isEmpty, "an exclusive group lock covers the shared one")
        var other = LockSet()
        other.thread("t2", group: nil)
        #expect(held.missing(from: other) == other)
    }
}
