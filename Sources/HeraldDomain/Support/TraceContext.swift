/// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent` a request or a
/// CloudEvent (its distributed-tracing extension attribute) carries, so that a log line can be
/// joined to the caller's trace. Only a value of the exact W3C form is kept — nothing else of
/// the header ever reaches a log line — and only its 55 characters of version 00's layout.
package enum TraceContext {
    /// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower-case, ids not all zeros,
    /// version not `ff`; a later version may append `-…` after the flags, which is dropped.
    /// Nil for anything else.
    package static func traceparent(_ value: String?) -> String? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes.count <= 512 else { return nil }
        func hex(_ range: Range<Int>) -> Bool {
            bytes[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        func zeros(_ range: Range<Int>) -> Bool { bytes[range].allSatisfy { $0 == 0x30 } }
        let dash = UInt8(ascii: "-")
        guard hex(0..<2), bytes[2] == dash, hex(3..<35), bytes[35] == dash, hex(36..<52), bytes[52] == dash, hex(53..<55),
              !(bytes[0] == UInt8(ascii: "f") && bytes[1] == UInt8(ascii: "f")),
              !zeros(3..<35), !zeros(36..<52) else { return nil }
        let version00 = bytes[0] == 0x30 && bytes[1] == 0x30
        if version00 { guard bytes.count == 55 else { return nil } }
        else if bytes.count > 55 { guard bytes[55] == dash else { return nil } }
        return String(decoding: bytes[0..<55], as: UTF8.self)
    }
}
