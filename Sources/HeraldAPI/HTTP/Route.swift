import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres

/// The services a group of handlers uses, taken from the instance's (`Dependencies`) for each
/// request: every handler file declares its own (`InboxAPI.Services`, `DatabaseServices`), so
/// what a handler can touch is written in its type.
package protocol HandlerServices: Sendable {
    init(_ all: Dependencies)
}

/// The services of handlers that only read and write the database.
package struct DatabaseServices: HandlerServices {
    package let database: PostgresPool
    package init(_ all: Dependencies) { database = all.database }
}

/// A route's handler and what the pipeline checks before calling it.
package struct Route: Sendable {
    /// The handler with its services' type erased: the pipeline hands it the request, its path
    /// parameters, the caller and the instance's services, of which it keeps its own.
    package typealias Handler = @Sendable (Request, [String: String], Principal, Dependencies) throws -> Response

    /// Who may call it.
    package let access: Access
    /// Media types accepted for a body; empty when the route takes no body.
    package let accepts: [String]
    package let handler: Handler
    /// Makes the handler for an instance's services: its own are built here, once.
    private let bind: @Sendable (Dependencies) -> Handler

    /// A route whose handler uses `Services`. Until `bound(to:)`, each call builds them.
    package init<Services: HandlerServices>(access: Access, accepts: [String] = [],
                                            handler: @escaping @Sendable (RequestContext<Services>) throws -> Response) {
        let bind: @Sendable (Dependencies) -> Handler = { all in
            let services = Services(all)
            return { request, parameters, principal, _ in
                try handler(RequestContext(request: request, parameters: parameters, principal: principal, services: services))
            }
        }
        self.init(access: access, accepts: accepts, bind: bind, handler: { try bind($3)($0, $1, $2, $3) })
    }

    private init(access: Access, accepts: [String], bind: @escaping @Sendable (Dependencies) -> Handler, handler: @escaping Handler) {
        self.access = access
        self.accepts = accepts
        self.bind = bind
        self.handler = handler
    }

    /// The same handler under another access (the /v1/me mirror).
    package func mirrored(access: Access) -> Route {
        Route(access: access, accepts: accepts, bind: bind, handler: handler)
    }

    /// The route with its handler's services built from `all` now, at start-up, not per request.
    package func bound(to all: Dependencies) -> Route {
        let handler = bind(all)
        return Route(access: access, accepts: accepts, bind: { _ in handler }, handler: handler)
    }

    /// Media types of the JSON routes.
    package static let json = ["application/json"]
}

/// Everything a handler gets: the request, its path parameters, the caller and the services its
/// file declares.
package struct RequestContext<Services: HandlerServices>: Sendable {
    package let request: Request
    package let parameters: [String: String]
    package let principal: Principal
    package let services: Services

    /// A path parameter by name (the router guarantees the names of its pattern).
    package func parameter(_ name: String) -> String {
        parameters[name] ?? ""
    }

    /// The app the request acts in; app routes always have one.
    package var app: String {
        principal.app ?? ""
    }
}
