import CMicroHTTPDHooks
import Glibc
import Testing

/// `CMicroHTTPDHooks/framing.c`: the bytes libmicrohttpd reads, followed to answer a chunked
/// body over the limit at once. Driven through a socket pair and `recv`, as the library reads.
@Suite("Chunk framing")
struct ChunkFramingTests {
    static let overflow = Array("10000000000000000\r\n".utf8)

    /// The bytes a reader of a followed socket gets when `stream` arrives in pieces of the given
    /// sizes (the rest in one piece), read with a buffer of `buffer` bytes.
    static func through(_ stream: [UInt8], pieces: [Int] = [], limit: UInt64 = 64, buffer: Int = 65_536) -> [UInt8] {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { return [] }
        defer { close(pair[0]); close(pair[1]) }
        herald_track_connection(pair[0], limit)
        defer { herald_untrack_connection(pair[0]) }
        var output: [UInt8] = []
        var readBuffer = [UInt8](repeating: 0, count: buffer)
        func drain() {
            while true {
                let count = recv(pair[0], &readBuffer, buffer, Int32(MSG_DONTWAIT))
                guard count > 0 else { return }
                output.append(contentsOf: readBuffer[0..<count])
            }
        }
        var offset = 0
        for size in pieces + [stream.count] where offset < stream.count {
            let end = min(stream.count, offset + size)
            _ = stream[offset..<end].withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }
            offset = end
            drain()
        }
        drain()
        return output
    }

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Requests libmicrohttpd serves, one after another on a connection: a GET after empty lines,
    /// a Content-Length body holding what would be a chunk size, chunked bodies with an
    /// extension, bare LFs, a split CRLF, hex-looking data and a trailer, then a last GET.
    static let served = bytes(
        "\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            + "POST /v1/events HTTP/1.1\r\ncontent-length: 20\r\n\r\nffffffffffffffff\r\n00"
            + "POST /v1/events HTTP/1.1\r\nTransfer-Encoding:   Chunked\r\nX-Long: \(String(repeating: "y", count: 300))\r\n\r\n"
            + "a;name=value\r\nffffffffff\r\n" + "00010\nffffffffffffffff\n" + "0\r\nX-Trailer: ffffffffffffffff\r\n\r\n"
            + "POST /v1/events HTTP/1.1\nTransfer-Encoding: chunked\n\n20\n" + String(repeating: "f", count: 32) + "\n0\n\n"
            + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")

    @Test("bytes that stay within the limit pass unchanged, however the reads split them")
    func servedUnchanged() {
        #expect(Self.through(Self.served) == Self.served)
        for split in 1..<Self.served.count {
            let output = Self.through(Self.served, pieces: [split])
            #expect(output == Self.served, "split at \(split)")
            if output != Self.served { return }
        }
        #expect(Self.through(Self.served, pieces: Array(repeating: 1, count: Self.served.count)) == Self.served, "one byte at a time")

        // It kept in step to the end: a chunk over the limit after all of them is caught.
        let head = Self.bytes("POST /v1/events HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        let caught = Self.served + head + Self.bytes("f") + Self.overflow
        for split in [0, 17, 101, 250, Self.served.count] {
            let output = Self.through(Self.served + head + Self.bytes("ffffffffffffffff\r\n"), pieces: split > 0 ? [split] : [])
            #expect(output == caught, "split at \(split)")
        }
    }

    @Test("chunk sizes adding up to more than the limit become a size beyond 64 bits, from the digit that passes it")
    func overLimit() {
        let head = Self.bytes("POST /v1/events HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        // 0x30 = 48, then 0x11 = 17: 65 > 64 at the second digit of the second size.
        let body = Self.bytes("30\r\n" + String(repeating: "x", count: 48) + "\r\n11\r\nxxxx")
        let stream = head + body
        let passing = head.count + 4 + 48 + 2 + 1
        let expected = Array(stream[0..<passing]) + Self.overflow
        // The rest of the read that passed the limit is not handed over; later reads are (the
        // library discards them once it has answered 413).
        #expect(Self.through(stream) == expected)
        for split in [1, head.count, passing, passing + 1, stream.count - 1] {
            let output = Self.through(stream, pieces: [split])
            #expect(output.starts(with: expected), "split at \(split): \(String(decoding: output, as: UTF8.self).debugDescription)")
        }
        // One size alone: `ffffffffffffffff` passes 64 at its second digit.
        let single = head + Self.bytes("ffffffffffffffff\r\n")
        #expect(Self.through(single) == head + Self.bytes("f") + Self.overflow)
        // A read buffer too small for the replacement: it comes over the next reads.
        #expect(Self.through(single, buffer: 7).starts(with: head + Self.bytes("f") + Self.overflow))
        // Exactly the limit is within it.
        let exact = head + Self.bytes("40\r\n" + String(repeating: "x", count: 64) + "\r\n0\r\n\r\n")
        #expect(Self.through(exact) == exact)
        // With a larger limit the same bytes pass.
        #expect(Self.through(stream, limit: 1 << 20) == stream)
    }

    @Test("framing it does not understand is passed through untouched, for libmicrohttpd and Herald to refuse")
    func unfollowed() {
        let huge = "ffffffffffffffff\r\n"
        let cases = [
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n  , gzip\r\n\r\n" + huge,           // folded
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + huge,
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + huge,
            "POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nxx" + huge,
            "POST / HTTP/1.1\r\nContent-Length: 2x\r\n\r\nxx" + huge,
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxx?" + huge,                 // no CRLF after data
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n 2\r\nxx\r\n" + huge,            // a blank in a size
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\u{0}\r\n\r\n" + huge,                    // a NUL in a head line
        ]
        for text in cases {
            #expect(Self.through(Self.bytes(text)) == Self.bytes(text), "\(text.debugDescription)")
        }
        // A coding other than chunked (Herald refuses it) is not a chunked body.
        let gzip = Self.bytes("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n" + huge)
        #expect(Self.through(gzip) == gzip)
    }

    @Test("a socket that is not followed is read as it is")
    func notFollowed() {
        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]); close(pair[1]) }
        let stream = Self.bytes("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n")
        _ = stream.withUnsafeBytes { send(pair[1], $0.baseAddress, $0.count, 0) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = recv(pair[0], &buffer, buffer.count, 0)
        #expect(Array(buffer[0..<max(0, count)]) == stream)
    }
}
