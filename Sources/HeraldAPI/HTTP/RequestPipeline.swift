import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres
import JSON

/// Herald's HTTP application: the route table and the pipeline every request goes through —
/// route (404/405), token (401), role and app (403), body (413/415), handler — with errors
/// rendered as SPEC §3 says and one log line per request.
package struct RequestPipeline: Sendable {
    package let services: Dependencies
    package let router: Router<Route>
    package let authenticator: Authenticator

    package init(services: Dependencies) {
        self.services = services
        self.authenticator = Authenticator(adminToken: services.configuration.adminToken,
                                           store: services.tenancy, database: services.database)
        var router = Router<Route>()
        OperationsAPI.register(in: &router)
        TenancyAPI.register(in: &router)
        IngestAPI.register(in: &router, limiter: InFlightLimiter(
            limit: services.configuration.ingestMaxInFlight,
            maxWaiting: services.configuration.ingestMaxWaiting,
            queueMilliseconds: services.configuration.ingestQueueMilliseconds))
        SubscriptionsAPI.register(in: &router)
        MembershipAPI.register(in: &router)
        PinsAPI.register(in: &router)
        InboxAPI.register(in: &router)
        PreferencesAPI.register(in: &router)
        WebPushKeysAPI.register(in: &router)
        ConversationLevelsAPI.register(in: &router)
        JobsAPI.register(in: &router)
        RoutingAPI.register(in: &router)
        TokenKeysAPI.register(in: &router)
        DevicesAPI.register(in: &router)
        ChangesAPI.register(in: &router)
        ConsoleAPI.register(in: &router)
        UserRoutes.mirror(in: &router)
        // each handler's services built once, here, rather than for every request
        var bound = Router<Route>()
        for entry in router.entries { bound.add(entry.method, entry.pattern, entry.value.bound(to: services)) }
        self.router = bound
    }

    /// Every (method, pattern) served, for documentation and tests.
    package var routes: [(method: HTTPMethod, pattern: String)] { router.patterns }

    /// The responder given to the HTTP server.
    package func respond(_ request: Request) -> Response {
        var pattern = "unmatched"
        var principal = Principal.anonymous
        var response: Response
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            response = HTTPError.notFound.response
        case .methodNotAllowed(let allowed, let matched):
            pattern = matched
            if request.method == .options, UserRoutes.isMirror(matched), let origin = request.header("origin"),
               let method = request.header("access-control-request-method") {
                response = preflight(origin: origin, method: method, allowed: allowed, request: request, pattern: matched)
            } else {
                response = HTTPError.methodNotAllowed(allowed: allowed).response
            }
        case .found(let route, let matched, let parameters):
            pattern = matched
            var corsOrigin: String?
            do {
                response = try Self.againIfConnectionLost(request) {
                    try Self.checkPathEncoding(request, pattern: matched)
                    principal = try authenticator.authenticate(request, access: route.access)
                    try Self.checkBody(request, route: route, limit: services.configuration.maxBodyBytes)
                    var parameters = parameters
                    // The mirror's uid is the token's (UserRoutes).
                    if let uid = principal.uid { parameters[UserRoutes.uidParameter] = uid }
                    corsOrigin = principal.corsOrigin
                    return try route.handler(request, parameters, principal, services)
                }
            } catch let refusal as Authenticator.UserRefusal {
                corsOrigin = refusal.corsOrigin
                response = refusal.error.response
            } catch {
                response = errorResponse(error, request: request, pattern: pattern)
            }
            if UserRoutes.isMirror(matched) { UserRoutes.addCORSHeaders(&response, origin: corsOrigin) }
        }
        if response.isDeferred, let deferral = request.deferral {
            // Logged when the answer is sent.
            let service = self
            let matched = pattern
            let caller = principal
            deferral.onComplete { final in
                service.logRequest(request, pattern: matched, principal: caller, status: final.status, extra: final.logFields)
            }
        } else {
            logRequest(request, pattern: pattern, principal: principal, status: response.status, extra: response.logFields)
        }
        return response
    }

    /// Runs a request's work, and a read-only request's (GET, HEAD) once more when a database
    /// connection broke under it (`connectionLost`: the server restarted, failed over or ended
    /// the session while the connection was in use, or in the pool unnoticed). The broken
    /// connection was closed, so the second run gets a fresh one from the pool; only if that
    /// fails too is the answer 503. Other requests are not run twice: a write may have been
    /// committed before the connection broke.
    package static func againIfConnectionLost<T>(_ request: Request, _ work: () throws -> T) throws -> T {
        do {
            return try work()
        } catch let error as PostgresError where error.code == .connectionLost && (request.method == .get || request.method == .head) {
            return try work()
        }
    }

    /// A CORS preflight for a user route, which carries no token: the origin must be listed by
    /// some app (the request itself is then allowed only for the token's app).
    private func preflight(origin: String, method: String, allowed: [HTTPMethod], request: Request, pattern: String) -> Response {
        do {
            let listed = try services.database.withConnection { try TokenKeyStore().anyAppAllows(origin: origin, on: $0) }
            return CORS.preflight(origin: origin, method: method, allowed: allowed, originListed: listed)
        } catch {
            return errorResponse(error, request: request, pattern: pattern)
        }
    }

    /// A path parameter must be valid UTF-8 once percent-decoded: `%FF` is not an id.
    package static func checkPathEncoding(_ request: Request, pattern: String) throws(HTTPError) {
        guard let index = request.invalidPathSegments.first else { return }
        var segments = pattern.split(separator: "/", omittingEmptySubsequences: false)
        if segments.first == "" { segments.removeFirst() }
        let name = index < segments.count && segments[index].hasPrefix("{") ? String(segments[index].dropFirst().dropLast()) : "path"
        throw HTTPError.badRequest("\(name) is not valid UTF-8", field: name)
    }

    package static func checkBody(_ request: Request, route: Route, limit: Int) throws(HTTPError) {
        guard !route.accepts.isEmpty else { return }
        if request.bodyTooLarge { throw HTTPError.payloadTooLarge(limit: limit) }
        // An empty body without a Content-Type is left to the handler (all its fields optional
        // or "required" errors); anything sent must be of an accepted type.
        if request.body.isEmpty && request.header("content-type") == nil { return }
        guard let type = request.mediaType, route.accepts.contains(type) else {
            throw HTTPError.unsupportedMediaType(expected: route.accepts)
        }
    }

    /// Maps any error to its response; only `HTTPError`s reach the client as they are.
    package func errorResponse(_ error: any Error, request: Request, pattern: String) -> Response {
        Self.errorResponse(error, logger: services.logger, requestID: request.id, pattern: pattern)
    }

    /// Maps any error to its response (and logs what is not the client's): for answers given
    /// later, outside `respond` (a deferred ingest).
    package static func errorResponse(_ error: any Error, logger: Logger, requestID: String, pattern: String) -> Response {
        if let error = error as? HTTPError { return error.response }
        if let error = error as? PostgresError {
            if error.code == .poolTimeout { return HTTPError.overloaded().response }
            if error.code == .invalidParameter {
                // Input that PostgreSQL cannot hold (a NUL) which no reader refused first
                // (`Request.jsonBody` does for bodies, `Identifier` for ids): bad input, not a
                // fault; logged so that the reader that let it through is found.
                logger.warn("a parameter PostgreSQL cannot hold reached a statement", [
                    "requestId": .string(requestID), "route": .string(pattern), "error": .string(String(describing: error)),
                ])
                return HTTPError.badRequest("a value contains a NUL character (U+0000)").response
            }
            if error.isTransient {
                logger.warn("transaction conflict", ["requestId": .string(requestID), "route": .string(pattern),
                                                              "sqlState": .string(error.sqlState ?? "")])
                return HTTPError.unavailable(retryAfterSeconds: 1).response
            }
            if error.isUnavailable {
                logger.warn("database unavailable", [
                    "requestId": .string(requestID), "route": .string(pattern), "error": .string(error.message),
                ])
                return HTTPError.unavailable().response
            }
        }
        logger.error("unhandled error", [
            "requestId": .string(requestID), "route": .string(pattern), "error": .string(String(describing: error)),
        ])
        return HTTPError.internalError.response
    }

    private func logRequest(_ request: Request, pattern: String, principal: Principal, status: Int, extra: [String: JSONValue] = [:]) {
        let durationMs = Double(monotonicNanoseconds() &- request.startedAt) / 1_000_000
        services.metrics.observe(method: request.method.rawValue, route: pattern, status: status, seconds: durationMs / 1000)
        var fields = extra
        fields.merge([
            "requestId": .string(request.id),
            "method": .string(request.method.rawValue),
            "route": .string(pattern),
            "status": .int(status),
            "durationMs": .double((durationMs * 1000).rounded() / 1000),
        ]) { _, own in own }
        if let app = principal.app { fields["app"] = .string(app) }
        if let role = principal.roleName { fields["role"] = .string(role) }
        // The caller's W3C trace, when its traceparent header is one (never anything else of it).
        if let trace = TraceContext.traceparent(request.headers["traceparent"]) { fields["traceparent"] = .string(trace) }
        services.logger.info("request", fields)
    }
}
