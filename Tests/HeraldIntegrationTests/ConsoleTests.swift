import Foundation
@testable import HeraldTestSupport
import Testing

/// SPEC §16 at the HTTP level (the page itself is driven in Chromium by scripts/console_test.py):
/// the console's files are served without a token under a strict CSP, and nothing else is.
@Suite("Operator console files", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct ConsoleTests {
    let environment: TestEnvironment
    var client: HTTPClient { environment.client }

    init() throws {
        environment = try TestEnvironment.shared()
    }

    @Test("the page and its files are served without a token, under a CSP without inline script")
    func files() throws {
        let page = try client.get("/console/")
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        let policy = try #require(page.headers["content-security-policy"])
        #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && !policy.contains("unsafe"))
        #expect(page.headers["x-content-type-options"] == "nosniff")
        #expect(page.text.contains(#"<script type="module" src="console.js"></script>"#))
        #expect(!page.text.contains("<script>") && !page.text.contains("style=\""))
        for (name, type) in [("console.js", "text/javascript; charset=utf-8"), ("console.css", "text/css; charset=utf-8"),
                             ("favicon.svg", "image/svg+xml")] {
            let file = try client.get("/console/\(name)")
            #expect(file.status == 200 && file.headers["content-type"] == type && !file.body.isEmpty, "\(name)")
            #expect(file.headers["content-security-policy"] == policy)
        }
        let bare = try client.get("/console")
        #expect(bare.status == 308 && bare.headers["location"] == "/console/")
    }

    @Test("no other file is served: unknown names, hidden files and paths out of the folder are 404")
    func nothingElse() throws {
        for path in ["/console/nope.js", "/console/.gitignore", "/console/..%2FREADME.md", "/console/%2E%2E%2Fsql%2F0001_tenancy.sql",
                     "/console/index.html%00.js", "/console/sub/index.html"] {
            let response = try client.get(path)
            #expect(response.status == 404 || response.status == 400, "\(path): \(response.status)")
            #expect(response.headers["content-type"] == "application/json", "\(path)")
        }
    }
}
