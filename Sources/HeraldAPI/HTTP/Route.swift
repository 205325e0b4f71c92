import HeraldDomain
import HeraldStore
import HTTPServer

/// A route's handler and what the pipeline checks before calling it.
package struct Route: Sendable {
    package typealias Handler = @Sendable (RequestContext) throws -> Response

    /// Who may call it.
    package let access: Access
    /// Media types accepted for a body; empty when the route takes no body.
    package let accepts: [String]
    package let handler: Handler

    package init(access: Access, accepts: [String] = [], handler: @escaping Handler) {
        self.access = access
        self.accepts = accepts
        self.handler = handler
    }

    /// Media types of the JSON routes.
    package static let json = ["application/json"]
}

/// Everything a handler gets: the request, its path parameters, the caller and the services.
package struct RequestContext: Sendable {
    package let request: Request
    package let parameters: [String: String]
    package let principal: Principal
    package let services: Dependencies

    /// A path parameter by name (the router guarantees the names of its pattern).
    package func parameter(_ name: String) -> String {
        parameters[name] ?? ""
    }

    /// The app the request acts in; app routes always have one.
    package var app: String {
        principal.app ?? ""
    }
}
