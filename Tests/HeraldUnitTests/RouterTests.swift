import HTTPServer
import Testing

@Suite("Router")
struct RouterTests {
    func router() -> Router<String> {
        var router = Router<String>()
        router.add(.get, "/v1/apps", "list apps")
        router.add(.post, "/v1/apps", "create app")
        router.add(.get, "/v1/apps/{app}/keys", "list keys")
        router.add(.delete, "/v1/apps/{app}/keys/{keyId}", "revoke key")
        router.add(.post, "/v1/users/{uid}/threads/read", "read all")
        router.add(.post, "/v1/users/{uid}/threads/{messageId}/read", "read one")
        router.add(.get, "/v1/users/{uid}/threads/{messageId}", "thread")
        return router
    }

    @Test("a literal route matches by method")
    func literal() {
        guard case .found(let value, let pattern, let parameters) = router().match(method: .post, path: "/v1/apps") else {
            Issue.record("no match"); return
        }
        #expect(value == "create app")
        #expect(pattern == "/v1/apps")
        #expect(parameters.isEmpty)
    }

    @Test("path parameters are bound by name")
    func parameters() {
        guard case .found(let value, _, let parameters) = router().match(method: .delete, path: "/v1/apps/acme/keys/k1") else {
            Issue.record("no match"); return
        }
        #expect(value == "revoke key")
        #expect(parameters == ["app": "acme", "keyId": "k1"])
    }

    @Test("a literal segment beats a parameter at the same place")
    func specificity() {
        guard case .found(let value, _, let parameters) = router().match(method: .post, path: "/v1/users/u1/threads/read") else {
            Issue.record("no match"); return
        }
        #expect(value == "read all")
        #expect(parameters == ["uid": "u1"])
        guard case .found(let other, _, let otherParameters) = router().match(method: .post, path: "/v1/users/u1/threads/m9/read") else {
            Issue.record("no match"); return
        }
        #expect(other == "read one")
        #expect(otherParameters == ["uid": "u1", "messageId": "m9"])
    }

    @Test("a less specific route still serves a method the literal one lacks")
    func fallbackToParameterForOtherMethod() {
        guard case .found(let value, _, let parameters) = router().match(method: .get, path: "/v1/users/u1/threads/read") else {
            Issue.record("no match"); return
        }
        #expect(value == "thread")
        #expect(parameters["messageId"] == "read")
    }

    @Test("a known path with another method is 405 with the allowed methods")
    func methodNotAllowed() {
        guard case .methodNotAllowed(let allowed, let pattern) = router().match(method: .put, path: "/v1/apps") else {
            Issue.record("expected 405"); return
        }
        #expect(allowed == [.get, .post])
        #expect(pattern == "/v1/apps")
    }

    @Test("unknown paths, extra segments, trailing slashes and empty parameters are 404",
          arguments: ["/", "/v1", "/v1/apps/", "/v1/apps/acme", "/v1/apps//keys", "/v1/apps/acme/keys/k1/x", "/v2/apps"])
    func notFound(path: String) {
        guard case .notFound = router().match(method: .get, path: path) else {
            Issue.record("\(path) should be 404"); return
        }
    }
}
