import HeraldDomain
import HeraldStore
import HTTPServer
import Postgres

/// Decides who is calling and whether they may call the route (SPEC §2): the token (401), then
/// the role and app (403, or 400/404 for the admin's `X-App-Id`).
package struct Authenticator: Sendable {
    package let adminToken: AdminToken?
    package let store: TenancyStore
    package let database: PostgresPool
    package let userTokens = UserTokenVerifier()
    package let userLimiter = UserRateLimiter()

    package init(adminToken: String?, store: TenancyStore, database: PostgresPool) {
        self.adminToken = adminToken.map(AdminToken.init)
        self.store = store
        self.database = database
    }

    package static let missingToken = HTTPError(status: 401, code: "AUTH_ERR_APIKEY_NOT_FOUND",
                                        message: "a valid API key is required in Authorization: Bearer <key>")
    package static let noAccess = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                    message: "this key may not use this route or app")
    package static let userTokenElsewhere = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                              message: "a user token may call only the /v1/me/… routes, for its own app")
    package static let keyOnUserRoute = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                          message: "/v1/me/… takes a user token; API keys and the admin token name the user: /v1/users/{uid}/…")

    /// The `WWW-Authenticate` challenge of the user routes (RFC 6750 §3).
    package static let bearerChallenge = #"Bearer realm="herald""#

    /// `401` for a refused user token, with RFC 6750's `invalid_token` challenge.
    package static func tokenRefused(_ rejection: UserToken.Rejection) -> HTTPError {
        let (code, message) = switch rejection {
        case .invalid(let reason): ("AUTH_ERR_TOKEN_INVALID", reason)
        case .expired(let reason): ("AUTH_ERR_TOKEN_EXPIRED", reason)
        }
        return HTTPError(status: 401, code: code, message: message,
                         headers: ["WWW-Authenticate": bearerChallenge + #", error="invalid_token""#])
    }

    package func authenticate(_ request: Request, access: Access) throws -> Principal {
        if access == .public { return .anonymous }
        guard let token = Self.bearerToken(request) else {
            var error = Self.missingToken
            if access == .user { error.headers["WWW-Authenticate"] = Self.bearerChallenge }
            throw error
        }
        let requestedApp = request.header("x-app-id")

        if let adminToken, adminToken.matches(token) {
            switch access {
            case .user:
                throw Self.keyOnUserRoute
            case .public, .admin:
                return Principal(kind: .admin, app: nil)
            case .app:
                guard let app = requestedApp, !app.isEmpty else {
                    throw HTTPError.badRequest("the admin token must name an app in X-App-Id", field: "X-App-Id")
                }
                guard Identifier.isValid(app),
                      try database.withConnection({ try store.appExists(app, on: $0) }) else {
                    throw HTTPError(status: 404, code: "ERR_APP_NOT_FOUND", message: "no such app",
                                    params: ["field": "X-App-Id"])
                }
                return Principal(kind: .admin, app: app)
            }
        }

        // Checked after the admin token, which is the operator's to choose (it may hold dots).
        if UserToken.looksLikeJWT(token) {
            return try authenticateUser(token, request: request, access: access)
        }

        guard let key = APIKey.parse(token),
              let stored = try database.withConnection({ try store.liveKey(id: key.id, on: $0) }),
              key.matches(secretHash: stored.secretHash) else {
            // On the user routes a bearer token that is no key is a malformed user token.
            if access == .user { throw Self.tokenRefused(.invalid("the token is not a compact JWS (header.claims.signature)")) }
            throw Self.missingToken
        }
        switch access {
        case .public:
            return .anonymous
        case .admin:
            throw Self.noAccess
        case .user:
            throw Self.keyOnUserRoute
        case .app(let roles):
            guard roles.contains(stored.role) else { throw Self.noAccess }
            if let requestedApp, requestedApp != stored.app { throw Self.noAccess }
            return Principal(kind: .key(id: key.id, role: stored.role), app: stored.app)
        }
    }

    /// A user token refused, with the request's origin when the token's app allows it: the
    /// pipeline answers `error` with that origin's CORS headers, as it does the token's successes.
    package struct UserRefusal: Error {
        package let error: HTTPError
        package let corsOrigin: String?
    }

    /// A user token: verified on every route (401 when refused), allowed only on the user routes
    /// (403 elsewhere), then held to the user's rate (429).
    private func authenticateUser(_ token: String, request: Request, access: Access) throws -> Principal {
        func allowed(_ settings: UserAccessSettings?) -> String? {
            request.header("origin").flatMap { settings?.corsOrigins.contains($0) == true ? $0 : nil }
        }
        let verified: (grant: UserToken.Grant, access: UserAccessSettings)
        do {
            verified = try userTokens.verify(token, database: database)
        } catch let failure as UserTokenVerifier.Failure {
            throw UserRefusal(error: Self.tokenRefused(failure.rejection), corsOrigin: allowed(failure.access))
        }
        let grant = verified.grant
        let origin = allowed(verified.access)
        guard access == .user else { throw Self.userTokenElsewhere }
        if let app = request.header("x-app-id"), app != grant.app {
            throw UserRefusal(error: Self.userTokenElsewhere, corsOrigin: origin)
        }
        if let retryAfter = userLimiter.take(app: grant.app, uid: grant.uid, limit: verified.access.rateLimit) {
            throw UserRefusal(error: HTTPError(status: 429, code: "ERR_OVERLOADED",
                                               message: "this user's request rate is over the app's userRateLimit; retry later",
                                               headers: ["Retry-After": String(retryAfter)]),
                              corsOrigin: origin)
        }
        return Principal(kind: .user(uid: grant.uid, kid: grant.kid), app: grant.app, corsOrigin: origin)
    }

    /// The token of `Authorization: Bearer <token>`; the scheme is case-insensitive.
    package static func bearerToken(_ request: Request) -> String? {
        guard let header = request.header("authorization") else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingPrefixAndSuffixSpaces()
        return token.isEmpty ? nil : token
    }
}

private extension Substring {
    func trimmingPrefixAndSuffixSpaces() -> String {
        var slice = self
        while slice.first == " " { slice.removeFirst() }
        while slice.last == " " { slice.removeLast() }
        return String(slice)
    }
}
