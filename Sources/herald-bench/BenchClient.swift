import Glibc

/// A keep-alive HTTP/1.1 client over one blocking socket: the bench's load generator. It sends
/// a request in one write and reads a response framed by Content-Length, which is all Herald
/// answers with.
final class BenchConnection {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    struct Reply {
        let status: Int
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    let host: String
    let port: Int
    private var fd: Int32 = -1
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var pending: [UInt8] = []

    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    deinit { if fd >= 0 { close(fd) } }

    private func connectIfNeeded() throws {
        guard fd < 0 else { return }
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { throw Failure(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(socketFD, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(socketFD)
            throw Failure(description: "connect to \(host):\(port) failed: errno \(errno)")
        }
        fd = socketFD
        pending.removeAll(keepingCapacity: true)
    }

    /// Writes one request (without waiting for its answer).
    func send(_ method: String, _ path: String, token: String? = nil, contentType: String? = nil, body: [UInt8] = []) throws {
        try connectIfNeeded()
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if !body.isEmpty || method != "GET" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        var bytes = Array(head.utf8)
        bytes += body
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if written <= 0 {
                reset()
                throw Failure(description: "write failed: errno \(errno)")
            }
            offset += written
        }
    }

    /// Reads the answer of the oldest request sent.
    func receive() throws -> Reply {
        while true {
            if let reply = try takeReply() { return reply }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            if count <= 0 {
                reset()
                throw Failure(description: "connection closed while reading")
            }
            pending += buffer[0..<count]
        }
    }

    func request(_ method: String, _ path: String, token: String? = nil, contentType: String? = nil,
                 body: [UInt8] = []) throws -> Reply {
        try send(method, path, token: token, contentType: contentType, body: body)
        return try receive()
    }

    func request(_ method: String, _ path: String, token: String? = nil, json: String) throws -> Reply {
        try request(method, path, token: token, contentType: "application/json", body: Array(json.utf8))
    }

    private func reset() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// A whole response from `pending`, if one is there.
    private func takeReply() throws -> Reply? {
        guard let end = Self.headerEnd(pending) else { return nil }
        let head = String(decoding: pending[0..<end], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.count >= 12, let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw Failure(description: "bad status line")
        }
        var length = 0
        var closes = false
        for line in lines.dropFirst() {
            let lower = line.lowercased()
            if lower.hasPrefix("content-length:") { length = Int(lower.dropFirst(15).trimmingCharacters(in: " ")) ?? 0 }
            if lower.hasPrefix("connection:") && lower.contains("close") { closes = true }
        }
        let total = end + 4 + length
        guard pending.count >= total else { return nil }
        let body = Array(pending[(end + 4)..<total])
        pending.removeFirst(total)
        if closes { reset() }
        return Reply(status: status, body: body)
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

extension Substring {
    func trimmingCharacters(in set: Character) -> Substring {
        var text = self
        while text.first == set { text = text.dropFirst() }
        while text.last == set { text = text.dropLast() }
        return text
    }
}
