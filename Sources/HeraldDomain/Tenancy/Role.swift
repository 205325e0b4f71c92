/// What an app key may do (SPEC §2).
package enum Role: String, Sendable, Codable, CaseIterable {
    /// `POST /v1/events` only: the message bus.
    case ingest
    /// The jobs API only: push senders.
    case worker
    /// Every app route of its app, the jobs API included.
    case server
}

/// Who may call a route.
package enum Access: Sendable, Equatable {
    /// No token needed (`/healthz`, `/readyz`, …).
    case `public`
    /// The admin token only.
    case admin
    /// App keys with one of these roles, or the admin token naming the app in `X-App-Id`.
    case app(Set<Role>)
    /// A user token only (SPEC §15): the `/v1/me/…` mirror of the user routes.
    case user

    /// Routes of the chat backend and operators.
    package static let server = Access.app([.server])
    /// Routes of push senders (and the server role).
    package static let worker = Access.app([.worker, .server])
    /// The ingest route (and the server role).
    package static let ingest = Access.app([.ingest, .server])
    /// Any app key.
    package static let anyAppKey = Access.app(Set(Role.allCases))
}

/// The caller of a request, once authenticated.
package struct Principal: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        case anonymous
        case admin
        case key(id: String, role: Role)
        /// A user token's `sub`, verified with token key `kid`.
        case user(uid: String, kid: String)
    }

    package let kind: Kind
    /// The app the request acts in; nil for anonymous and for the admin on admin routes.
    package let app: String?
    /// A user request's `Origin` when its app lists it in `corsOrigins`: the response allows it.
    package var corsOrigin: String?

    package init(kind: Kind, app: String?, corsOrigin: String? = nil) {
        self.kind = kind
        self.app = app
        self.corsOrigin = corsOrigin
    }

    package static let anonymous = Principal(kind: .anonymous, app: nil)

    /// The uid a user token names; nil for every other caller.
    package var uid: String? {
        if case .user(let uid, _) = kind { uid } else { nil }
    }

    /// The role name for responses and logs (`admin`, `server`, …).
    package var roleName: String? {
        switch kind {
        case .anonymous: return nil
        case .admin: return "admin"
        case .key(_, let role): return role.rawValue
        case .user: return "user"
        }
    }
}
