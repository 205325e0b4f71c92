@testable import HeraldTestSupport
import Testing

/// The suites that load both cores for a minute or more (issue 32's large transactions and
/// long-poll crowds). `make test` runs them after the others, alone and one after the other
/// (scripts/test.sh): beside other suites they would make those miss their own timings, and
/// theirs would measure the neighbours.
@Suite("Heavy system tests", .serialized, .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct HeavyTests {
    /// Where `uid`'s change feed starts now (SPEC §14: the cursor of an empty first page).
    static func startCursor(_ app: TestApp, _ uid: String, client: HTTPClient) throws -> String {
        let meta = try client.get("/v1/users/\(uid)/changes", token: app.serverKey).json["meta"] as? [String: Any]
        return try #require(meta?["next"] as? String)
    }
}
