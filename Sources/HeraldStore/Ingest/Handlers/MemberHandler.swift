import HeraldDomain
import Postgres

/// Membership events and notices (SPEC §1, §11.3): each membership event is stored, is evidence
/// of current membership and recomputes the member's subscriptions; after the derivation the
/// events that changed membership, and every notice, make their member-action jobs.
struct MemberHandler: IngestHandler {
    let app: String
    private var changes: [DomainEvent.MembershipChange] = []
    /// Membership events (changing membership or not), for their member-action jobs.
    private var events: [MemberActionJobs.Item] = []
    private var notices: [MemberActionJobs.Item] = []
    /// Who was a member before this round, for the events that change it.
    private var before: MemberActionJobs.State = [:]

    init(app: String) { self.app = app }

    mutating func add(_ change: DomainEvent.MembershipChange, event: IncomingEvent) {
        changes.append(change)
        events.append(.init(event: event, change: change))
    }

    mutating func add(notice change: DomainEvent.MembershipChange, event: IncomingEvent) {
        notices.append(.init(event: event, change: change))
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !changes.isEmpty else { return }
        try connection.send("""
            INSERT INTO member_events (app, group_id, uid, at, joined)
            SELECT \(app), g, u, a, j FROM unnest(\(changes.map(\.guid))::text[], \(changes.map(\.uid))::text[], \(changes.map(\.at))::bigint[], \(changes.map(\.joined))::boolean[]) AS x(g, u, a, j)
            ON CONFLICT DO NOTHING
            """)
        for change in changes {
            round.evidenceGroups.append(change.guid)
            round.evidenceUsers.append(change.uid)
            round.membership(group: change.guid, uid: change.uid, joined: change.joined ? change.at : nil,
                             removed: change.joined ? nil : change.at)
        }
        // read before the round's derivation writes current membership
        before = try MemberActionJobs.state(app: app, of: changes, on: connection)
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        var actions = notices
        if !events.isEmpty {
            let after = try MemberActionJobs.state(app: app, of: changes, on: connection)
            var sentBy: [[UInt8]: Int64] = [:]
            for m in round.fresh {
                guard let guid = m.conversation.groupID else { continue }
                let key = MemberActionJobs.key(group: guid, uid: m.sender)
                sentBy[key] = min(sentBy[key] ?? m.sentAt, m.sentAt)
            }
            actions = MemberActionJobs.changing(events, before: before, after: after, sentBy: sentBy) + actions
        }
        return try MemberActionJobs.make(app: app, actions, appSettings: round.settings, on: connection)
    }
}

/// Reactions (SPEC §11.1–11.2): one row per reaction id whatever the order of its events; a
/// reaction added for the first time notifies, a removal cancels or retracts (`ReactionJobs`).
struct ReactionHandler: IngestHandler {
    let app: String
    private var items: [ReactionJobs.Item] = []
    private var stored = ReactionJobs.Stored()

    init(app: String) { self.app = app }

    mutating func add(_ reaction: DomainEvent.Reaction, event: IncomingEvent) {
        items.append(.init(event: event, reaction: reaction))
    }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        stored = try ReactionJobs.store(app: app, items, on: connection)
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        try ReactionJobs.make(app: app, stored, appSettings: round.settings, on: connection)
    }
}

/// Pins and saves (SPEC §12.1): stored after the round's messages (a system pin in a one-on-one
/// conversation takes the message's); the changes they make note the readers' change feeds and
/// make sync jobs (`SyncJobs`).
struct PinHandler: IngestHandler {
    let app: String
    var pins = PinStore.Pins()
    private var changes: [PinStore.Change] = []

    init(app: String) { self.app = app }

    mutating func store(_ round: inout IngestRound, on connection: PostgresConnection) throws {
        guard !pins.isEmpty else { return }
        changes = try PinStore.apply(app: app, pins, on: connection)
    }

    func produce(_ round: IngestRound, on connection: PostgresConnection) throws -> Int {
        guard !pins.isEmpty else { return 0 }
        return try SyncJobs.make(app: app, changes, appSettings: round.settings, on: connection)
    }
}
