import Foundation
@testable import HeraldAPI
@testable import HeraldApp
@testable import HeraldDomain
@testable import HeraldStore
import JSON
import Testing

/// openapi/openapi.json documents the `/v1/me/…` routes chat clients call, each exactly as
/// `OpenAPIDocument.withUserMirror` derives it from its `/v1/users/{uid}/…` twin: a user route
/// changed without `python3 scripts/openapi_me.py --write` fails here. (That every route served
/// is in the file, and nothing else, is OpenAPITests' job, against the running server.)
@Suite("OpenAPI file")
struct OpenAPIFileTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("openapi/openapi.json").path

    @Test("the file's /v1/me operations are the mirror of its /v1/users ones")
    func mirror() throws {
        let data = try #require(FileManager.default.contents(atPath: Self.file))
        let document = try JSONParser.parse(Array(data), maxDepth: 64)
        guard case .object(let root) = document, case .object(let paths)? = root["paths"] else {
            Issue.record("no paths in \(Self.file)")
            return
        }
        let mine = paths.keys.filter { $0.hasPrefix(UserRoutes.mirrorPrefix) }.sorted()
        let users = paths.keys.filter { $0.hasPrefix(UserRoutes.userPrefix) }.map(UserRoutes.mirrorPath(of:)).sorted()
        #expect(mine == users, "run python3 scripts/openapi_me.py --write")
        guard case .object(let mirrored) = OpenAPIDocument.withUserMirror(document), case .object(let derived)? = mirrored["paths"] else {
            Issue.record("withUserMirror lost the paths")
            return
        }
        let stale = mine.filter { derived[$0] != paths[$0] }
        #expect(stale == [], "these /v1/me operations differ from their /v1/users twins: run python3 scripts/openapi_me.py --write")
    }

    @Test("the file documents what Herald POSTs (webhooks): webhook and gorush mode, and a direct-mode webhook device")
    func webhooks() throws {
        let data = try #require(FileManager.default.contents(atPath: Self.file))
        guard case .object(let root) = try JSONParser.parse(Array(data), maxDepth: 64),
              case .object(let webhooks)? = root["webhooks"] else {
            Issue.record("no webhooks in \(Self.file)")
            return
        }
        #expect(Set(webhooks.keys) == ["job", "gorush", "webhookDevice"])
    }
}
