/// Writes JSON text by appending to one string: what Herald's responses are written with, on hot
/// paths too (no `Encodable`, no reflection, no intermediate values). Keys are written in the
/// order given; commas are the writer's business.
///
///     var writer = JSONWriter()
///     writer.object { o in
///         o.field("accepted", 3)
///         o.field("results") { $0.array(results) }
///     }
///     writer.text   // {"accepted":3,"results":[…]}
public struct JSONWriter: Sendable {
    /// The text written so far.
    public private(set) var text = ""
    private var first = true

    public init(reservingCapacity capacity: Int = 0) {
        if capacity > 0 { text.reserveCapacity(capacity) }
    }

    private mutating func separate() {
        if !first { text += "," }
        first = false
    }

    /// An object whose fields `body` writes.
    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        container("{", "}", body)
    }

    /// An array whose elements `body` writes.
    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        container("[", "]", body)
    }

    private mutating func container(_ open: String, _ close: String, _ body: (inout JSONWriter) -> Void) {
        separate()
        text += open
        first = true
        body(&self)
        text += close
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
        JSONValue.writeString(name, to: &text)
        text += ":"
        first = true
    }

    public mutating func value(_ string: String?) {
        separate()
        if let string { JSONValue.writeString(string, to: &text) } else { text += "null" }
    }

    public mutating func value(_ number: Int) {
        separate()
        text += String(number)
    }

    public mutating func value(_ number: Int64) {
        separate()
        text += String(number)
    }

    public mutating func value(_ flag: Bool) {
        separate()
        text += flag ? "true" : "false"
    }

    public mutating func value(_ json: JSONValue) {
        separate()
        text += json.jsonText
    }

    /// Text that is JSON already (built by PostgreSQL, or by another writer).
    public mutating func raw(_ json: String) {
        separate()
        text += json
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
