import HTTPServer

/// A route's handler and what the pipeline checks before calling it.
public struct Route: Sendable {
    public typealias Handler = @Sendable (RequestContext) throws -> Response

    /// Who may call it.
    public let access: Access
    /// Media types accepted for a body; empty when the route takes no body.
    public let accepts: [String]
    public let handler: Handler

    public init(access: Access, accepts: [String] = [], handler: @escaping Handler) {
        self.access = access
        self.accepts = accepts
        self.handler = handler
    }

    /// Media types of the JSON routes.
    public static let json = ["application/json"]
}

/// Everything a handler gets: the request, its path parameters, the caller and the services.
public struct RequestContext: Sendable {
    public let request: Request
    public let parameters: [String: String]
    public let principal: Principal
    public let services: Dependencies

    /// A path parameter by name (the router guarantees the names of its pattern).
    public func parameter(_ name: String) -> String {
        parameters[name] ?? ""
    }

    /// The app the request acts in; app routes always have one.
    public var app: String {
        principal.app ?? ""
    }
}
