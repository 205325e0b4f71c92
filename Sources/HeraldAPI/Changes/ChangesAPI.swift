import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// SPEC §14: `GET /v1/users/{uid}/changes?cursor&limit&waitSeconds` (server role; mirrored on
/// `/v1/me/changes`).
package enum ChangesAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let changeWaiter: ChangeWaiter
        package let cursorKey: [UInt8]
        package let database: PostgresPool

        package init(_ all: Dependencies) {
            changeWaiter = all.changeWaiter
            cursorKey = all.cursorKey
            database = all.database
        }
    }

    package typealias Context = RequestContext<Services>

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/v1/users/{uid}/changes", Route(access: .server, handler: changes))
    }

    package static func changes(_ context: Context) throws -> Response {
        let uid = try Identifier.validate(context.parameter("uid"), field: "uid")
        let list = try ListParameters(context.request, defaultLimit: 100)
        var wait = 0
        if let text = context.request.query["waitSeconds"] {
            guard let value = Int(text), (0...30).contains(value) else { throw HTTPError.invalidLimit(field: "waitSeconds", min: 0, max: 30) }
            wait = value
        }
        let feed = ChangeFeed(app: context.app, uid: uid, key: context.services.cursorKey)
        let database = context.services.database
        // Without a cursor the feed starts now: an empty page whose cursor is after the latest change.
        guard let cursor = list.cursor else {
            let now = try database.withConnection { try feed.now(on: $0) }
            return .json(FeedPage(items: [], next: feed.encode(now), hasMore: false))
        }
        let position = try feed.decode(cursor)
        let limit = list.limit
        let page = try database.withConnection { connection -> FeedPage in
            try feed.check(position, retentionSeconds: try PreferenceStore().settings(app: context.app, on: connection).changeRetentionSeconds)
            return try feed.page(after: position, limit: limit, on: connection)
        }
        guard page.items.isEmpty, wait > 0, let deferral = context.request.deferral else { return .json(page) }
        // Nothing yet: the connection waits without a server thread until a change of this user
        // commits (NOTIFY) or the time is up.
        try context.services.changeWaiter.wait(.init(
            app: context.app,
            key: ChangeWaiter.key(app: context.app, uid: uid),
            deadline: monotonicNanoseconds() + UInt64(wait) * 1_000_000_000,
            deferral: deferral,
            attempt: { connection in
                let page = try feed.page(after: position, limit: limit, on: connection)
                return page.items.isEmpty ? nil : .json(page)
            },
            empty: { .json(FeedPage(items: [], next: feed.encode(.init(seq: position.seq, time: currentTimeMilliseconds())), hasMore: false)) }))
        return .deferred
    }
}
