import HTTPServer
import Postgres

/// Decides who is calling and whether they may call the route (SPEC §2): the token (401), then
/// the role and app (403, or 400/404 for the admin's `X-App-Id`).
public struct Authenticator: Sendable {
    let adminToken: AdminToken?
    let store: TenancyStore
    let database: PostgresPool

    public init(adminToken: String?, store: TenancyStore, database: PostgresPool) {
        self.adminToken = adminToken.map(AdminToken.init)
        self.store = store
        self.database = database
    }

    static let missingToken = HTTPError(status: 401, code: "AUTH_ERR_APIKEY_NOT_FOUND",
                                        message: "a valid API key is required in Authorization: Bearer <key>")
    static let noAccess = HTTPError(status: 403, code: "AUTH_ERR_NO_ACCESS",
                                    message: "this key may not use this route or app")

    public func authenticate(_ request: Request, access: Access) throws -> Principal {
        if access == .public { return .anonymous }
        guard let token = Self.bearerToken(request) else { throw Self.missingToken }
        let requestedApp = request.header("x-app-id")

        if let adminToken, adminToken.matches(token) {
            switch access {
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

        guard let key = APIKey.parse(token),
              let stored = try database.withConnection({ try store.liveKey(id: key.id, on: $0) }),
              key.matches(secretHash: stored.secretHash) else {
            throw Self.missingToken
        }
        switch access {
        case .public:
            return .anonymous
        case .admin:
            throw Self.noAccess
        case .app(let roles):
            guard roles.contains(stored.role) else { throw Self.noAccess }
            if let requestedApp, requestedApp != stored.app { throw Self.noAccess }
            return Principal(kind: .key(id: key.id, role: stored.role), app: stored.app)
        }
    }

    /// The token of `Authorization: Bearer <token>`; the scheme is case-insensitive.
    static func bearerToken(_ request: Request) -> String? {
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
