import Foundation
@testable import HeraldTestSupport
import Testing

/// GET /openapi.json documents exactly the routes the server has, so a route added without its
/// documentation (or documentation left behind by a removed route) fails the build. Whether the
/// answers match the document is checked against the live server by scripts/contract-test.sh.
@Suite("OpenAPI document", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct OpenAPITests {
    let environment: TestEnvironment

    init() throws {
        environment = try TestEnvironment.shared()
    }

    func document() throws -> [String: Any] {
        let response = try environment.client.get("/openapi.json")
        #expect(response.status == 200)
        #expect(response.headers["content-type"]?.hasPrefix("application/json") == true)
        let object = try JSONSerialization.jsonObject(with: Data(response.body))
        return try #require(object as? [String: Any], "the document is a JSON object")
    }

    @Test("it is OpenAPI 3.1, served without a token")
    func version() throws {
        let openapi = try #require(try document()["openapi"] as? String)
        #expect(openapi.hasPrefix("3.1"))
    }

    @Test("every route served is documented, and every documented operation is served")
    func routes() throws {
        let paths = try #require(try document()["paths"] as? [String: [String: Any]])
        let methods: Set = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
        var documented: Set<String> = []
        for (path, item) in paths {
            for method in item.keys where methods.contains(method) {
                documented.insert(method.uppercased() + " " + path)
            }
        }
        let served = Set(environment.server.service.routes.map { $0.method.rawValue + " " + $0.pattern })
        #expect(!served.isEmpty)
        #expect(served.subtracting(documented).sorted() == [], "served but not in /openapi.json")
        #expect(documented.subtracting(served).sorted() == [], "in /openapi.json but not served")
    }

    @Test("every $ref points at something in the document")
    func references() throws {
        let document = try document()
        var references: Set<String> = []
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                if let reference = object["$ref"] as? String { references.insert(reference) }
                object.values.forEach(collect)
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(document)
        #expect(!references.isEmpty)
        for reference in references.sorted() {
            var node: Any? = document
            #expect(reference.hasPrefix("#/"), "\(reference) is local")
            for part in reference.dropFirst(2).split(separator: "/") {
                node = (node as? [String: Any])?[String(part)]
            }
            #expect(node != nil, "\(reference) resolves")
        }
    }
}
