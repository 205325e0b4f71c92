import FoundationEssentials
import HTTPServer
import Postgres
import Secrets
import JSON

/// `limit` and `cursor` of a list endpoint (SPEC §3).
public struct ListParameters: Sendable, Equatable {
    public let limit: Int
    public let cursor: String?

    public static let maxLimit = 1000

    /// Reads `limit` (1–1000, else `400 ERR_INVALID_LIMIT`) and `cursor` from the query.
    public init(_ request: Request, defaultLimit: Int) throws(HTTPError) {
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
    public func position(kind: String) throws(HTTPError) -> String? {
        try cursor.map { cursor throws(HTTPError) in try Cursor.decode(kind: kind, fieldCount: 1, cursor)[0] }
    }

    /// The position as an integer (a sequence number or id).
    public func integerPosition(kind: String) throws(HTTPError) -> Int64? {
        guard let text = try position(kind: kind) else { return nil }
        guard let value = Int64(text) else { throw HTTPError.badRequest("cursor is not valid for this list", field: "cursor") }
        return value
    }

    /// The list envelope from rows fetched with `LIMIT limit + 1` whose column 0 is the position
    /// and column 1 the item's JSON text (built by PostgreSQL).
    public func page(_ rows: PostgresRows, kind: String) throws -> Response {
        page(try rows.map { (try $0.decode(0, as: String.self), try $0.decode(1, as: String.self)) }, kind: kind)
    }

    /// The same from (position, item JSON) pairs built in Swift.
    public func page(_ entries: [(position: String, json: String)], kind: String) -> Response {
        let page = entries.prefix(limit)
        let hasMore = entries.count > limit
        var next = "null"
        if hasMore, let last = page.last {
            next = "\"" + Cursor.encode(kind: kind, [last.position]) + "\""
        }
        let data = page.map(\.json).joined(separator: ",")
        return .jsonText("{\"data\":[\(data)],\"meta\":{\"hasMore\":\(hasMore),\"next\":\(next)}}")
    }
}

/// Opaque cursors: a kind tag and fields, base64url-encoded. A cursor of another kind, or one
/// that does not decode, is `400 ERR_BAD_REQUEST` with `params.field = "cursor"`.
public enum Cursor {
    private static let separator: Character = "\u{1F}"

    /// With a `key`, the cursor carries an HMAC of its content, so one that was altered is refused.
    public static func encode(kind: String, _ fields: [String], key: [UInt8]? = nil) -> String {
        var text = ([kind] + fields).joined(separator: String(separator))
        if let key { text += String(separator) + signature(text, key: key) }
        return Data(text.utf8).base64EncodedString()
            .replacing("+", with: "-")
            .replacing("/", with: "_")
            .replacing("=", with: "")
    }

    public static func decode(kind: String, fieldCount: Int, _ cursor: String, key: [UInt8]? = nil) throws(HTTPError) -> [String] {
        let invalid = HTTPError.badRequest("cursor is not valid for this list", field: "cursor")
        var base64 = cursor.replacing("-", with: "+").replacing("_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { throw invalid }
        let text = String(decoding: data, as: UTF8.self)
        var parts = text.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
        if let key {
            guard parts.count == fieldCount + 2, let mac = parts.popLast(),
                  Secrets.constantTimeEqual(Array(mac.utf8), Array(signature(parts.joined(separator: String(separator)), key: key).utf8))
            else { throw invalid }
        }
        guard parts.count == fieldCount + 1, parts[0] == kind else { throw invalid }
        // Unsigned cursors are the client's to forge: a NUL could never be a position (PostgreSQL
        // text cannot hold one, so it could not even be compared with one).
        guard !parts.contains(where: { $0.utf8.contains(0) }) else { throw invalid }
        return Array(parts.dropFirst())
    }

    private static func signature(_ text: String, key: [UInt8]) -> String {
        Secrets.hex(Array(Secrets.hmacSHA256(key: key, message: Array(text.utf8)).prefix(12)))
    }
}

/// The list envelope `{"data": [...], "meta": {"next", "hasMore"}}`.
public struct ListEnvelope<Item: Encodable & Sendable>: Encodable, Sendable {
    public struct Meta: Encodable, Sendable {
        public let next: String?
        public let hasMore: Bool

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(next, forKey: .next) // null, not absent
            try container.encode(hasMore, forKey: .hasMore)
        }

        enum CodingKeys: String, CodingKey { case next, hasMore }
    }

    public let data: [Item]
    public let meta: Meta

    /// A page from `limit + 1` fetched items: the extra one proves there is more.
    public init(fetched: [Item], limit: Int, cursor: (Item) -> String) {
        let page = Array(fetched.prefix(limit))
        let hasMore = fetched.count > limit
        self.data = page
        self.meta = Meta(next: hasMore ? page.last.map(cursor) : nil, hasMore: hasMore)
    }
}
