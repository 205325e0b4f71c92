import Foundation
import HTTPServer
import Testing

@Suite("Error rendering")
struct HTTPErrorTests {
    func body(_ response: Response) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
        return try #require(object?["error"] as? [String: Any])
    }

    @Test("an error renders as {error: {code, message, params}} with its status")
    func envelope() throws {
        let response = HTTPError.badRequest("data.sender is required", field: "data.sender").response
        #expect(response.status == 400)
        #expect(response.header("content-type") == "application/json")
        let error = try body(response)
        #expect(error["code"] as? String == "ERR_BAD_REQUEST")
        #expect(error["message"] as? String == "data.sender is required")
        #expect((error["params"] as? [String: Any])?["field"] as? String == "data.sender")
    }

    @Test("params is absent when empty")
    func noParams() throws {
        let error = try body(HTTPError.notFound.response)
        #expect(error["code"] as? String == "ERR_NOT_FOUND")
        #expect(error["params"] == nil)
    }

    @Test("limits carry field, min and max")
    func invalidLimit() throws {
        let error = try body(HTTPError.invalidLimit(min: 1, max: 1000).response)
        let params = try #require(error["params"] as? [String: Any])
        #expect(params["field"] as? String == "limit")
        #expect(params["min"] as? Int == 1)
        #expect(params["max"] as? Int == 1000)
    }

    @Test("429 and 503 carry Retry-After; 405 carries Allow")
    func headers() {
        let overloaded = HTTPError.overloaded().response
        #expect(overloaded.status == 429)
        #expect(overloaded.header("Retry-After") == "1")
        let unavailable = HTTPError.unavailable().response
        #expect(unavailable.status == 503)
        #expect(unavailable.header("retry-after") != nil)
        #expect(HTTPError.methodNotAllowed(allowed: [.get, .post]).response.header("Allow") == "GET, POST")
    }

    @Test("the 500 body says nothing about the cause")
    func internalError() throws {
        let response = HTTPError.internalError.response
        #expect(response.status == 500)
        let error = try body(response)
        #expect(error["code"] as? String == "ERR_INTERNAL")
        #expect(error["message"] as? String == "internal error")
    }

    struct Job: Decodable { let id: String; let attempt: Int }
    struct Jobs: Decodable { let jobs: [Job] }

    @Test("decoding errors name the dotted path with indexes", arguments: [
        (#"{"jobs":[{"id":"a","attempt":"x"}]}"#, "jobs[0].attempt"),
        (#"{"jobs":[{"id":"a","attempt":1},{"attempt":2}]}"#, "jobs[1].id"),
        (#"{"jobs":{}}"#, "jobs"),
        (#"{"jobs":[{"id":null,"attempt":1}]}"#, "jobs[0].id"),
        (#"{}"#, "jobs"),
    ])
    func decodingPaths(body: String, field: String) {
        let request = Request(method: .post, path: "/", body: Array(body.utf8))
        #expect(throws: HTTPError.self) { _ = try request.decodeJSON(Jobs.self) }
        do {
            _ = try request.decodeJSON(Jobs.self)
        } catch {
            #expect(error.status == 400)
            #expect(error.code == "ERR_BAD_REQUEST")
            #expect(error.params["field"] == .string(field))
        }
    }

    @Test("a body that is not JSON is a 400 without a field")
    func notJSON() {
        let request = Request(method: .post, path: "/", body: Array("{\"jobs\":".utf8))
        do {
            _ = try request.decodeJSON(Jobs.self)
            Issue.record("expected an error")
        } catch {
            #expect(error.code == "ERR_BAD_REQUEST")
            #expect(error.message == "body is not valid JSON: unexpected end of input at byte 8", "says why and where")
            #expect(error.params["field"] == nil)
        }
    }
}
