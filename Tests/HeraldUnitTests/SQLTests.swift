import Postgres
import Testing

/// `SQL`: an interpolated value is a parameter, a fragment keeps its own renumbered.
@Suite("SQL")
struct SQLTests {
    static func texts(_ sql: SQL) -> [String?] { sql.parameters.map(\.postgresText) }

    @Test("values become $n in order, never text; NULL is a parameter too")
    func values() {
        let app = "a'; DROP TABLE apps; --"
        let uids = ["u1", "u2"]
        let after: Int64? = nil
        let sql: SQL = "SELECT 1 FROM t WHERE app = \(app) AND uid = ANY (\(uids)::text[]) AND (\(after)::bigint IS NULL)"
        #expect(sql.text == "SELECT 1 FROM t WHERE app = $1 AND uid = ANY ($2::text[]) AND ($3::bigint IS NULL)")
        #expect(Self.texts(sql) == [app, #"{"u1","u2"}"#, nil])
    }

    @Test("a fragment's parameters are renumbered where it lands; unsafeRaw and literals add none")
    func fragments() {
        func access(uid: String) -> SQL { "g.uid = \(uid) AND g.app = \("a")" }
        let table = "job_rows"
        let sql: SQL = "SELECT \(1) FROM \(unsafeRaw: table) g WHERE \(access(uid: "u")) LIMIT \(10)"
        #expect(sql.text == "SELECT $1 FROM job_rows g WHERE g.uid = $2 AND g.app = $3 LIMIT $4")
        #expect(Self.texts(sql) == ["1", "u", "a", "10"])
        let joined = SQL.joined(["x = \(1)", "y = \(2)", "z"], separator: " AND ")
        #expect(joined.text == "x = $1 AND y = $2 AND z")
        let sum: SQL = "a = \(5) " + "AND b = \(6)"
        #expect(sum.text == "a = $1 AND b = $2" && Self.texts(sum) == ["5", "6"])
        let plain: SQL = "SELECT 1"
        #expect(plain.text == "SELECT 1" && plain.parameters.isEmpty)
    }
}
