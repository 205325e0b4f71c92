import HeraldDomain
import HeraldStore
import HTTPServer

/// `GET /console/` and its files (SPEC §16). They need no token (the page asks for one) and are
/// served under a Content-Security-Policy that allows nothing but this origin's own files: no
/// inline script or style, no other host, no framing.
package enum ConsoleAPI {
    /// What its handlers use.
    package struct Services: HandlerServices {
        package let console: ConsoleFiles

        package init(_ all: Dependencies) {
            console = all.console
        }
    }

    package typealias Context = RequestContext<Services>

    package static let securityHeaders: [(name: String, value: String)] = [
        ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cache-Control", "no-cache"),
    ]

    package static func register(in router: inout Router<Route>) {
        router.add(.get, "/console", Route(access: .public) { (_: Context) in
            Response(status: 308, headers: [("Location", "/console/"), ("Content-Type", "application/json")],
                     body: Array(#"{"location":"/console/"}"#.utf8))
        })
        router.add(.get, "/console/", Route(access: .public) { (context: Context) in try file("index.html", context) })
        router.add(.get, "/console/{file}", Route(access: .public) { (context: Context) in try file(context.parameter("file"), context) })
    }

    package static func file(_ name: String, _ context: Context) throws(HTTPError) -> Response {
        guard let file = context.services.console.files[name] else {
            throw HTTPError(status: 404, code: "ERR_NOT_FOUND", message: "no such console file", params: ["field": "file"])
        }
        return Response(status: 200, headers: [("Content-Type", file.contentType)] + securityHeaders, body: file.bytes)
    }
}
