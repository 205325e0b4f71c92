import JSON
import Testing

/// `JSONWriter` writes bytes; what it writes must be what `JSONValue` writes and what the parser
/// reads back, escapes included.
@Suite("JSON writer")
struct JSONWriterTests {
    /// Each string and its JSON literal.
    static let strings: [(String, String)] = [
        ("", #""""#), ("plain", #""plain""#), ("quote \" and backslash \\", #""quote \" and backslash \\""#),
        ("line\nbreak\r\ttab", #""line\nbreak\r\ttab""#), ("\u{0}\u{1}\u{1f} controls", #""\u0000\u0001\u001f controls""#),
        ("é ü 日本 🎉", #""é ü 日本 🎉""#), ("\u{7f} delete", "\"\u{7f} delete\""), ("</script>", #""</script>""#),
        ("mixed \"é\"\n\u{8}", #""mixed \"é\"\n\u0008""#),
    ]

    @Test("strings and keys are escaped as JSON requires, as JSONValue writes them, and parse back to themselves")
    func strings() throws {
        for (text, literal) in Self.strings {
            var writer = JSONWriter()
            writer.object { $0.field(text, text) }
            #expect(writer.text == "{" + literal + ":" + literal + "}")
            #expect(JSONValue.string(text).jsonText == literal)
            #expect(JSONValue.object([text: .string(text)]).jsonText == writer.text)
            #expect(try JSONParser.parse(writer.bytes)[text] == .string(text))
        }
    }

    @Test("numbers, booleans, null, raw JSON, nesting and commas")
    func values() throws {
        var writer = JSONWriter()
        writer.object { o in
            o.field("n", 42)
            o.field("big", Int64.min)
            o.field("yes", true)
            o.field("none", nil as String?)
            o.field("raw") { $0.raw(#"{"a":[1,2]}"#) }
            o.field("list", array: [JSONValue.string("x"), .bool(false)])
        }
        #expect(writer.text == #"{"n":42,"big":-9223372036854775808,"yes":true,"none":null,"raw":{"a":[1,2]},"list":["x",false]}"#)
    }

    @Test("rows of a JSON array of arrays read flat, as PostgreSQL writes them; a wrong shape is an error")
    func rows() throws {
        // json_agg(json_build_array(…))::text, with its spaces and line breaks
        let text = "[[\"phone\", \"apns\", \"t\\\"1\", null, false], \n [\"tablet\", \"fcm\", \"é\", \"x\", true]]"
        #expect(try JSONParser.rows(Array(text.utf8), width: 5)
                == [.string("phone"), .string("apns"), .string("t\"1"), .null, .bool(false),
                    .string("tablet"), .string("fcm"), .string("é"), .string("x"), .bool(true)])
        #expect(try JSONParser.rows(Array("[]".utf8), width: 5) == [])
        #expect(try JSONParser.rows(Array(" [ [1,2] ] ".utf8), width: 2) == [.int(1), .int(2)])
        for bad in ["[[1,2,3]]", "[[1]]", "[1,2]", "[[1,2]", "[[1,2]] x", "[[1,2],]", "", "[[\"\u{1}\",2]]"] {
            #expect(throws: JSONParser.SyntaxError.self, "\(bad)") { try JSONParser.rows(Array(bad.utf8), width: 2) }
        }
    }
}
