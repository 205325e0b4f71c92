import HeraldDomain
import HeraldStore
import HTTPServer

/// The `/v1/me/…` mirror (SPEC §15): every `/v1/users/{uid}/…` route, declared once, is also
/// served under `/v1/me/…` to user tokens, with `uid` taken from the token's `sub`. The mirror is
/// made from the router's table after every capability registered its routes, so a user route
/// added later is mirrored without a second declaration (and `OpenAPIDocument` mirrors its
/// documentation the same way).
package enum UserRoutes {
    package static let userPrefix = "/v1/users/{uid}/"
    package static let mirrorPrefix = "/v1/me/"
    package static let uidParameter = "uid"

    /// Adds the mirror of every user route registered so far.
    package static func mirror(in router: inout Router<Route>) {
        for entry in router.entries where entry.pattern.hasPrefix(userPrefix) {
            let route = entry.value
            router.add(entry.method, mirrorPath(of: entry.pattern),
                       route.mirrored(access: .user))
        }
    }

    /// `/v1/users/{uid}/threads` → `/v1/me/threads`.
    package static func mirrorPath(of pattern: String) -> String {
        mirrorPrefix + pattern.dropFirst(userPrefix.count)
    }

    package static func isMirror(_ pattern: String) -> Bool {
        pattern.hasPrefix(mirrorPrefix)
    }

    /// A user route's answer varies with `Origin`; an allowed origin may read it.
    package static func addCORSHeaders(_ response: inout Response, origin: String?) {
        if let origin {
            for (name, value) in CORS.allow(origin).sorted(by: { $0.key < $1.key }) where name != "Vary" && response.header(name) == nil {
                response.headers.append((name, value))
            }
        }
        // A Vary a handler set keeps its names and gains Origin.
        if let index = response.headers.firstIndex(where: { $0.name.lowercased() == "vary" }) {
            let names = response.headers[index].value.split(separator: ",").map { $0.filter { $0 != " " }.lowercased() }
            if !names.contains("origin") { response.headers[index].value += ", Origin" }
        } else {
            response.headers.append(("Vary", "Origin"))
        }
    }
}
