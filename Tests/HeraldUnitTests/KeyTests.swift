@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import HTTPServer
import Secrets
import Testing

@Suite("Keys and secrets")
struct KeyTests {
    @Test("a generated key has a 64-bit id and a 256-bit secret and parses back")
    func roundTrip() throws {
        let key = APIKey.generate()
        #expect(key.id.count == 16)
        #expect(key.secret.count == 64)
        #expect(key.token.hasPrefix("hk_"))
        let parsed = try #require(APIKey.parse(key.token))
        #expect(parsed == key)
    }

    @Test("keys are random")
    func random() {
        let keys = (0..<100).map { _ in APIKey.generate().token }
        #expect(Set(keys).count == 100)
    }

    @Test("only the digest is compared, and a wrong secret does not match")
    func verification() throws {
        let key = APIKey.generate()
        let stored = key.secretHash
        #expect(stored.count == 32)
        #expect(stored != Array(key.secret.utf8))
        #expect(key.matches(secretHash: stored))
        var tampered = Array(key.secret)
        tampered[0] = tampered[0] == "a" ? "b" : "a"
        let wrong = APIKey(id: key.id, secret: String(tampered))
        #expect(!wrong.matches(secretHash: stored))
    }

    @Test("malformed tokens do not parse", arguments: [
        "", "hk_", "hk_abc_def", "sk_0123456789abcdef_" + String(repeating: "a", count: 64),
        "hk_0123456789abcdeg_" + String(repeating: "a", count: 64), "hk_0123456789abcdef_" + String(repeating: "a", count: 63),
        "hk_0123456789abcdef_" + String(repeating: "a", count: 64) + "_x",
    ])
    func malformed(token: String) {
        #expect(APIKey.parse(token) == nil)
    }

    @Test("SHA-256 matches the standard test vector")
    func sha256() {
        #expect(Secrets.hex(Secrets.sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test("constant-time equality")
    func constantTime() {
        #expect(Secrets.constantTimeEqual([1, 2, 3], [1, 2, 3]))
        #expect(!Secrets.constantTimeEqual([1, 2, 3], [1, 2, 4]))
        #expect(!Secrets.constantTimeEqual([1, 2, 3], [1, 2]))
    }

    @Test("the admin token matches only itself")
    func adminToken() {
        let token = AdminToken("a-long-admin-token")
        #expect(token.matches("a-long-admin-token"))
        #expect(!token.matches("a-long-admin-tokeN"))
        #expect(!token.matches(""))
    }

    @Test("bearer tokens are read case-insensitively and nothing else is accepted")
    func bearer() {
        func token(_ header: String?) -> String? {
            Authenticator.bearerToken(Request(method: .get, path: "/", headers: header.map { ["Authorization": $0] } ?? [:]))
        }
        #expect(token("Bearer abc") == "abc")
        #expect(token("bearer  abc ") == "abc")
        #expect(token("Basic abc") == nil)
        #expect(token("Bearer") == nil)
        #expect(token(nil) == nil)
    }

    @Test("identifiers: 1-128 characters, no control characters, no slash")
    func identifiers() {
        #expect(Identifier.isValid("acme"))
        #expect(Identifier.isValid(String(repeating: "é", count: 128)))
        #expect(!Identifier.isValid(""))
        #expect(!Identifier.isValid(String(repeating: "a", count: 129)))
        #expect(!Identifier.isValid("a/b"))
        #expect(!Identifier.isValid("a\nb"))
        #expect(!Identifier.isValid("a\u{7f}"))
    }

    @Test("cursors round-trip and refuse other kinds or garbage")
    func cursors() throws {
        let cursor = Cursor.encode(kind: "apps", ["a/b+c"])
        #expect(try Cursor.decode(kind: "apps", fieldCount: 1, cursor) == ["a/b+c"])
        #expect(!cursor.contains("/") && !cursor.contains("+") && !cursor.contains("="))
        #expect(throws: HTTPError.self) { try Cursor.decode(kind: "keys", fieldCount: 1, cursor) }
        #expect(throws: HTTPError.self) { try Cursor.decode(kind: "apps", fieldCount: 1, "!!!") }
        #expect(throws: HTTPError.self) { try Cursor.decode(kind: "apps", fieldCount: 2, cursor) }
    }
}
