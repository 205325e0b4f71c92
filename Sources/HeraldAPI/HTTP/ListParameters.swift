import HeraldDomain
import HeraldStore
import FoundationEssentials
import HTTPServer
import Postgres
import Secrets
import JSON

/// `limit` and `cursor` of a list endpoint (SPEC §3).
package struct ListParameters: Sendable, Equatable {
    package let limit: Int
    package let cursor: String?

    package static let maxLimit = 1000

    /// Reads `limit` (1–1000, else `400 ERR_INVALID_LIMIT`) and `cursor` from the query.
    package init(_ request: Request, defaultLimit: Int) throws(HTTPError) {
        if let text = request.query["limit"] {
            guard let value = Int(text), (1...Self.maxLimit).contains(value) else {
                throw HTTPError.invalidLimit(min: 1, max: Self.maxLimit)
            }
            limit = value
        } else {
            limit = defaultLimit
        }
        cursor = request.query["cursor"].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// The position a cursor of list `kind` holds (one field), nil without a cursor.
    package func position(kind: String) throws(HTTPError) -> String? {
        try cursor.map { cursor throws(HTTPError) in try Cursor.decode(kind: kind, fieldCount: 1, cursor)[0] }
    }

    /// The position as an integer (a sequence number or id).
    package func integerPosition(kind: String) throws(HTTPError) -> Int64? {
        guard let text = try position(kind: kind) else { return nil }
        guard let value = Int64(text) else { throw HTTPError.badRequest("cursor is not valid for this list", field: "cursor") }
        return value
    }

    /// The page of rows fetched with `LIMIT limit + 1` whose column 0 is the position and column
    /// 1 the item's JSON text (built by PostgreSQL).
    package func page(_ rows: PostgresRows, kind: String) throws -> Response {
        .json(page(try rows.map { (try $0.decode(0, as: String.self), RawJSON(try $0.decode(1, as: String.self))) }, kind: kind))
    }

    /// The page of (position, item) pairs fetched with `LIMIT limit + 1`: the extra one proves
    /// there is more, and the last item's position is the next cursor.
    package func page<Item: JSONWritable>(_ entries: [(position: String, item: Item)], kind: String) -> ListPage<Item> {
        let shown = entries.prefix(limit)
        let hasMore = entries.count > limit
        return ListPage(items: shown.map(\.item), next: hasMore ? shown.last.map { Cursor.encode(kind: kind, [$0.position]) } : nil)
    }
}

/// SPEC §3's list envelope, the one every list answers: `{"data": [...], "meta": {"next", "hasMore"}}`.
package struct ListPage<Item: JSONWritable>: JSONWritable {
    package let items: [Item]
    /// The cursor of the page after this one; nil on the last page.
    package let next: String?

    /// A page; a list that is never paged (an app's keys) is one page without a next.
    package init(items: [Item], next: String? = nil) {
        self.items = items
        self.next = next
    }

    package func write(to writer: inout JSONWriter) {
        writer.object { writeFields(to: &$0) }
    }

    /// `data` and `meta`, for an envelope that adds fields of its own (the inbox's `totals`).
    package func writeFields(to envelope: inout JSONWriter) {
        envelope.field("data", array: items)
        envelope.field("meta") { meta in
            meta.object { fields in
                fields.field("hasMore", next != nil)
                fields.field("next", next)
            }
        }
    }
}

