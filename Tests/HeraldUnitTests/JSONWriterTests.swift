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
}
