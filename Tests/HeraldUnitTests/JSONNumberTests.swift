import Foundation
import HTTPServer
import Testing
import JSON

/// A whole number is an integer however it is written (`3`, `3.0`, `3e0`), as in JSON Schema: the
/// OpenAPI document promises integers, and a client (or schemathesis) may send `3.0` for one.
@Suite("JSON numbers")
struct JSONNumberTests {
    @Test("the parser reads whole numbers as .int, whatever their form", arguments: [
        ("3", JSONValue.int(3)), ("3.0", .int(3)), ("-0.0", .int(0)), ("144.000", .int(144)), ("1e3", .int(1000)),
        ("2.50E1", .int(25)), ("-4e+0", .int(-4)), ("9223372036854775807.0", .int(Int.max)),
        ("-9223372036854775808.0", .int(Int.min)),
    ])
    func whole(text: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(Array(text.utf8)) == expected)
    }

    @Test("fractions stay .double, and so do whole numbers past 2^53 written with an exponent or past Int", arguments: [
        ("3.5", 3.5), ("1.0000000000000001", 1.0000000000000001), ("9223372036854775808.0", 9223372036854775808.0),
        ("1e300", 1e300), ("2.5e-1", 0.25), ("1e16", 1e16),
    ])
    func fraction(text: String, expected: Double) throws {
        #expect(try JSONParser.parse(Array(text.utf8)) == .double(expected))
    }

    @Test("Decodable JSONValue (bodies read with JSONDecoder) agrees")
    func decodable() throws {
        let values = try JSONDecoder().decode([JSONValue].self, from: Data("[3, 3.0, 1e2, 3.5, \"3\"]".utf8))
        #expect(values == [.int(3), .int(3), .int(100), .double(3.5), .string("3")])
    }

    @Test("nested values too, and the text written back is the integer's")
    func nested() throws {
        let value = try JSONParser.parse(Array(#"{"jobs": [{"attempt": 2.0}], "max": 5.00}"#.utf8))
        #expect(value["max"] == .int(5))
        #expect(value.jsonText == #"{"jobs":[{"attempt":2}],"max":5}"#)
    }
}
