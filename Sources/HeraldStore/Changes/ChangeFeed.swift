import HeraldDomain
import HTTPTypes
import JSON
import Postgres
import Secrets

/// SPEC §14: a user's change feed, read. What writes it is sql/functions/3_changes.sql (the
/// triggers and the commit step that numbers each change) and, for pins and saves,
/// `ChangeFeed.note` called by `SyncJobs`.
package struct ChangeFeed: Sendable {
    package static let expired = HTTPError(status: 410, code: "ERR_CURSOR_EXPIRED",
                                   message: "the cursor is older than the app's changeRetentionSeconds: read the state again and start a new feed",
                                   params: ["field": "cursor"])
    package static let invalidCursor = HTTPError.badRequest("cursor is not valid for this feed", field: "cursor")

    package let app: String
    package let uid: String
    package let key: [UInt8]

    package init(app: String, uid: String, key: [UInt8]) {
        self.app = app
        self.uid = uid
        self.key = key
    }

    /// Where a reader is: after change `seq`, as of `time` (the last item's, or when the page was
    /// read; a cursor whose time is past the retention has lost changes to the purge).
    package struct Position: Equatable {
        package let seq: Int64
        package let time: Int64

        package init(seq: Int64, time: Int64) {
            self.seq = seq
            self.time = time
        }
    }

    /// Binds a cursor to its app and user, so that another user's cursor is refused.
    private var binding: String {
        Secrets.hex(Array(Secrets.sha256(app + "\u{1F}" + uid).prefix(8)))
    }

    package func encode(_ position: Position) -> String {
        Cursor.encode(kind: "changes", [binding, String(position.seq), String(position.time)], key: key)
    }

    package func decode(_ cursor: String) throws(HTTPError) -> Position {
        let fields = try Cursor.decode(kind: "changes", fieldCount: 3, cursor, key: key)
        guard fields[0] == binding, let seq = Int64(fields[1]), seq >= 0, let time = Int64(fields[2]) else { throw Self.invalidCursor }
        return Position(seq: seq, time: time)
    }

    /// The position "now": after the user's latest change. A change committing later is numbered
    /// after it (its transaction holds the user's lock, taken after every earlier one committed).
    package func now(on connection: PostgresConnection) throws -> Position {
        let rows = try connection.query("SELECT coalesce(max(seq), 0) FROM changes WHERE app = \(app) AND uid = \(uid)")
        return Position(seq: try rows.first?.decode(0, as: Int64.self) ?? 0, time: currentTimeMilliseconds())
    }

    /// 410 when the position is older than the retention.
    package func check(_ position: Position, retentionSeconds: Int) throws(HTTPError) {
        if position.time < currentTimeMilliseconds() - Int64(retentionSeconds) * 1000 { throw Self.expired }
    }

    /// The page after `position`: one range scan of `changes_feed`.
    package func page(after position: Position, limit: Int, on connection: PostgresConnection) throws -> FeedPage {
        let rows = try connection.query("""
            SELECT c.seq, c.at, (CASE c.kind
                WHEN 'subscription' THEN jsonb_build_object('type', c.kind, 'parentMessageId', c.subject, 'subscribed', c.flag,
                                                           'source', c.source, 'reason', c.reason, 'since', c.time,
                                                           'level', coalesce(c.level, 'notify'), 'at', c.at)
                WHEN 'conversationLevel' THEN jsonb_build_object('type', c.kind, 'conversationId', c.subject, 'level', c.level,
                                                                'at', c.at)
                WHEN 'read' THEN jsonb_build_object('type', c.kind, 'parentMessageId', c.subject, 'readUpTo', c.read_up_to,
                                                   'unreadReplyCount', c.unread_replies, 'unreadMentionCount', c.unread_mentions,
                                                   'at', c.at)
                WHEN 'messagePin' THEN jsonb_build_object('type', c.kind, 'messageId', c.subject, 'conversationId', c.conversation_id,
                                                         'pinnedAt', c.time, 'pinnedBy', c.actor, 'at', c.at)
                WHEN 'save' THEN jsonb_build_object('type', c.kind, 'messageId', c.subject, 'savedAt', c.time, 'at', c.at)
                WHEN 'conversationPin' THEN jsonb_build_object('type', c.kind, 'conversationId', c.subject, 'pinnedAt', c.time,
                                                              'pinnedBy', c.actor, 'at', c.at)
                WHEN 'device' THEN jsonb_build_object('type', c.kind, 'deviceId', c.subject, 'removed', c.flag, 'at', c.at)
                ELSE jsonb_build_object('type', c.kind, 'at', c.at) END)::text
              FROM changes c
             WHERE c.app = \(app) AND c.uid = \(uid) AND c.seq > \(position.seq)
             ORDER BY c.seq
             LIMIT \(limit + 1)
            """)
        var items: [RawJSON] = []
        var last = position
        for row in rows.prefix(limit) {
            items.append(RawJSON(try row.decode(2, as: String.self)))
            last = Position(seq: try row.decode(0, as: Int64.self), time: try row.decode(1, as: Int64.self))
        }
        let hasMore = rows.count > limit
        // The last page: the next read starts from now (nothing of this user is missing before it).
        if !hasMore { last = Position(seq: last.seq, time: max(last.time, currentTimeMilliseconds())) }
        return FeedPage(items: items, next: encode(last), hasMore: hasMore)
    }

    /// A change to be numbered at commit (sql/functions/3_changes.sql): what `SyncJobs` notes for
    /// pins and saves, whose readers (a conversation's members) no table trigger knows.
    package struct Note {
        package let uid: String
        package let kind: String
        package let subject: String
        package var actor: String? = nil
    }

    /// Notes `notes` in the transaction of `connection`, in this order.
    package static func note(app: String, _ notes: [Note], on connection: PostgresConnection) throws {
        guard !notes.isEmpty else { return }
        try connection.query("""
            INSERT INTO changes_pending (app, uid, kind, subject, actor)
            SELECT \(app), n.uid, n.kind, n.subject, n.actor
              FROM unnest(\(notes.map(\.uid))::text[], \(notes.map(\.kind))::text[], \(notes.map(\.subject))::text[], \(notes.map(\.actor))::text[]) WITH ORDINALITY AS n(uid, kind, subject, actor, i)
             ORDER BY n.i
            """)
    }
}

/// A feed page: SPEC §3's envelope, where `next` is always there (the feed goes on) and
/// `hasMore` says whether more is there now.
package struct FeedPage: JSONWritable, Sendable {
    package let items: [RawJSON]
    package let next: String
    package let hasMore: Bool

    package init(items: [RawJSON], next: String, hasMore: Bool) {
        self.items = items
        self.next = next
        self.hasMore = hasMore
    }

    package func write(to writer: inout JSONWriter) {
        writer.object { envelope in
            envelope.field("data", array: items)
            envelope.field("meta") { meta in
                meta.object { fields in
                    fields.field("hasMore", hasMore)
                    fields.field("next", next)
                }
            }
        }
    }
}
