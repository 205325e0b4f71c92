/// Writes JSON as UTF-8 bytes appended to one buffer: what Herald's responses are written with,
/// on hot paths too (no `Encodable`, no reflection, no intermediate values). Keys are written in
/// the order given; commas are the writer's business.
///
///     var writer = JSONWriter()
///     writer.object { o in
///         o.field("accepted", 3)
///         o.field("results") { $0.array(results) }
///     }
///     writer.bytes  // {"accepted":3,"results":[…]}
///
/// Bytes rather than a `String`: a claim of 100 jobs appends thousands of pieces, and appending
/// to a string checks and recounts it each time (W5: 40% of Herald's CPU went to writing JSON).
public struct JSONWriter: Sendable {
    /// The UTF-8 bytes written so far.
    public private(set) var bytes: [UInt8] = []
    private var first = true

    /// The text written so far.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    public init(reservingCapacity capacity: Int = 0) {
        if capacity > 0 { bytes.reserveCapacity(capacity) }
    }

    private mutating func separate() {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = false
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// A JSON string literal of `text` (`JSONValue.appendString`).
    private mutating func string(_ text: String) {
        JSONValue.appendString(text, to: &bytes)
    }

    /// An object whose fields `body` writes.
    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        container("{", "}", body)
    }

    /// An array whose elements `body` writes.
    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        container("[", "]", body)
    }

    private mutating func container(_ open: Unicode.Scalar, _ close: Unicode.Scalar, _ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(UInt8(ascii: open))
        first = true
        body(&self)
        bytes.append(UInt8(ascii: close))
        first = false
    }

    /// An array of `items`.
    public mutating func array<Items: Sequence>(_ items: Items) where Items.Element: JSONWritable {
        array { writer in for item in items { item.write(to: &writer) } }
    }

    /// An array of strings.
    public mutating func array<Items: Sequence>(strings items: Items) where Items.Element == String {
        array { writer in for item in items { writer.value(item) } }
    }

    /// A field's name; the value written next is its value.
    public mutating func key(_ name: String) {
        separate()
        string(name)
        bytes.append(UInt8(ascii: ":"))
        first = true
    }

    public mutating func value(_ string: String?) {
        separate()
        if let string { self.string(string) } else { append("null") }
    }

    public mutating func value(_ number: Int) {
        separate()
        append(String(number))
    }

    public mutating func value(_ number: Int64) {
        separate()
        append(String(number))
    }

    public mutating func value(_ flag: Bool) {
        separate()
        append(flag ? "true" : "false")
    }

    public mutating func value(_ json: JSONValue) {
        separate()
        append(json.jsonText)
    }

    /// Text that is JSON already (built by PostgreSQL, or by another writer).
    public mutating func raw(_ json: String) {
        separate()
        append(json)
    }

    /// Writes the fields that `body` writes (at least one) into the object being written, and
    /// returns their bytes, to be written again into another object by `fields(_:)`.
    public mutating func recordingFields(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        let start = bytes.count + (first ? 0 : 1)   // after the comma the first field writes
        body(&self)
        return start < bytes.count ? Array(bytes[start...]) : []
    }

    /// Fields whose bytes `recordingFields` returned.
    public mutating func fields(_ recorded: [UInt8]) {
        guard !recorded.isEmpty else { return }
        separate()
        bytes.append(contentsOf: recorded)
    }

    public mutating func field(_ name: String, _ string: String?) { key(name); value(string) }
    public mutating func field(_ name: String, _ number: Int) { key(name); value(number) }
    public mutating func field(_ name: String, _ number: Int64) { key(name); value(number) }
    public mutating func field(_ name: String, _ flag: Bool) { key(name); value(flag) }
    public mutating func field(_ name: String, _ json: JSONValue) { key(name); value(json) }
    /// A field whose value `body` writes (an object, an array, raw JSON).
    public mutating func field(_ name: String, _ body: (inout JSONWriter) -> Void) { key(name); body(&self) }
    /// A field holding an array of `items`.
    public mutating func field<Items: Sequence>(_ name: String, array items: Items) where Items.Element: JSONWritable {
        key(name)
        array(items)
    }
}

/// A value that writes itself as JSON: the response types of Herald's routes.
public protocol JSONWritable {
    func write(to writer: inout JSONWriter)
}

extension JSONWritable {
    /// The value's JSON text.
    public var jsonText: String {
        var writer = JSONWriter()
        write(to: &writer)
        return writer.text
    }
}

/// JSON text made elsewhere (by PostgreSQL, or a job's payload), written as it is.
public struct RawJSON: JSONWritable, Sendable {
    public let text: String
    public init(_ text: String) { self.text = text }
    public func write(to writer: inout JSONWriter) { writer.raw(text) }
}

extension JSONValue: JSONWritable {
    public func write(to writer: inout JSONWriter) { writer.value(self) }
}
