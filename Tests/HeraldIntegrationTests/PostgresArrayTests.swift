import Postgres
@testable import HeraldTestSupport
import Testing

/// Array parameters are sent as PostgreSQL array literals (`unnest($1::text[])` batches).
@Suite("Postgres array literals", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct PostgresArrayTests {
    @Test("quotes and backslashes are escaped, nil is NULL, other bytes pass as they are")
    func literal() {
        let values: [String?] = ["plain", "a\"b", nil, "c\\d", "", "é ü {x,y}", "\"\\\""]
        #expect(values.postgresText == #"{"plain","a\"b",NULL,"c\\d","","é ü {x,y}","\"\\\""}"#)
        #expect([String]().postgresText == "{}")
        #expect([1, 2, 3].postgresText == #"{"1","2","3"}"#)
    }

    @Test("a literal round-trips through PostgreSQL unchanged")
    func roundTrip() throws {
        let environment = try TestEnvironment.shared()
        let connection = try environment.connection()
        let values: [String?] = ["a\"b", nil, "c\\d", "", "é ü {x,y}", "\"\\\"", "NULL", "line\nbreak"]
        let rows = try connection.query("SELECT x FROM unnest(\(values)::text[]) WITH ORDINALITY AS u(x, n) ORDER BY n")
        #expect(try rows.map { try $0.decode(0, as: String?.self) } == values)
    }
}
