import HeraldDomain
import Postgres

/// Writes a round's newly accepted events with one handler per kind of event, in three steps:
/// every handler stores its facts (set-based: one statement per kind of fact), the round derives
/// threads, subscriptions, membership and inbox state from all of them at once
/// (`IngestRound.derive`), then every handler makes its jobs (`IngestHandler`).
package struct FactWriter {
    package let app: String

    private var deleted: MessageDeletedHandler
    private var messages: MessageCreatedHandler
    private var edits: MessageEditedHandler
    /// Replies of this batch under whose ids earlier facts were filed (see `IngestStore.resolveThreads`).
    private var rehome: RehomeHandler
    private var members: MemberHandler
    private var groups: GroupDeletedHandler
    private var pins: PinHandler
    private var reactions: ReactionHandler

    /// The batch's message.created, one per message id (the first wins, as a redelivery under a
    /// new event id would), read by `IngestStore.apply`: every one of them must come back fresh
    /// from `createdStatements`.
    package var created: [DomainEvent.MessageCreated] { messages.created }

    package init(app: String, events: [IncomingEvent], rehome: [Rehoming] = []) {
        self.app = app
        self.rehome = RehomeHandler(moves: rehome)
        deleted = MessageDeletedHandler(app: app)
        messages = MessageCreatedHandler(app: app)
        edits = MessageEditedHandler(app: app)
        members = MemberHandler(app: app)
        groups = GroupDeletedHandler(app: app)
        pins = PinHandler(app: app)
        reactions = ReactionHandler(app: app)
        for event in events {
            switch event.event {
            case .messageCreated(let m): messages.add(m, event: event)
            case .messageEdited(let m): edits.add(m, event: event)
            case .messageDeleted(let m): deleted.add(m, event: event)
            case .membership(let change): members.add(change, event: event)
            case .memberNotice(let change): members.add(notice: change, event: event)
            case .reaction(let reaction): reactions.add(reaction, event: event)
            case .messagePin(let pin): pins.pins.messages.append((event, pin))
            case .messageSave(let save): pins.pins.saves.append((event, save))
            case .conversationPin(let pin): pins.pins.conversations.append((event, pin))
            case .groupDeleted(let guid, let at): groups.add(group: guid, at: at)
            case .noEffect: break
            }
        }
    }

    /// Stores the facts, derives what they touch and makes the jobs; returns the count of jobs made.
    package func write(holding held: LockSet, jobsMayExist: Bool = false, settings: BatchSettings,
                       prestored: Prestored? = nil, on connection: PostgresConnection) throws -> Int {
        var round = IngestRound(app: app, held: held, jobsMayExist: jobsMayExist, settings: settings)
        var (deleted, messages, edits, rehome, members, groups, pins, reactions) =
            (self.deleted, self.messages, self.edits, self.rehome, self.members, self.groups, self.pins, self.reactions)
        messages.prestored = prestored
        // Step 1, in this order: deletions first (a reply counted as unread before this batch is
        // uncounted); edits after the messages (an edit of a message new here is a version of
        // it, not a placeholder); what moves to a new reply's root after both; pins and
        // reactions after the messages (a system pin in a one-on-one conversation takes the
        // message's).
        try deleted.store(&round, on: connection)
        try messages.store(&round, on: connection)
        try edits.store(&round, on: connection)
        try rehome.store(&round, on: connection)
        try members.store(&round, on: connection)
        try groups.store(&round, on: connection)
        try pins.store(&round, on: connection)
        try reactions.store(&round, on: connection)
        // Step 2
        try round.derive(on: connection)
        // Step 3, in this order: cancellations and retractions before the messages' jobs; the
        // edits' mention jobs before their updates; member actions last.
        let handlers: [any IngestHandler] = [deleted, groups, messages, edits, pins, reactions, members]
        return try handlers.reduce(0) { $0 + (try $1.produce(round, on: connection)) }
    }

    /// What a round's first round trip stored already (`IngestStore.apply`, when every event of
    /// the round is a new message.created): the answer of `createdStatements`' insert of the
    /// messages, and the rows of its evidence query (nil: it had none).
    package struct Prestored {
        package let applied: PostgresRows
        package let evidence: PostgresRows?
    }

    /// The statements that store the batch's messages when every one is new, for a caller that
    /// sends them ahead in one round trip (`MessageCreatedHandler.statementsAhead`).
    package func createdStatements() -> (statements: [SQL], evidence: Int?) {
        messages.statementsAhead()
    }

    /// The messages of `created` whose creation the insert's answer `rows` found new, and the ids
    /// of those that filled a placeholder.
    package static func applied(_ rows: PostgresRows, of created: [DomainEvent.MessageCreated]) throws
        -> (fresh: [DomainEvent.MessageCreated], placeholders: [String]) {
        try MessageCreatedHandler.applied(rows, of: created)
    }
}
