import Foundation
import Glibc

/// A response as the tests see it.
struct HTTPResult: Sendable {
    let status: Int
    /// Header values by lower-case name.
    let headers: [String: String]
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object (empty when it is not one).
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// `error.code` of an error body.
    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    /// `error.params` of an error body.
    var errorParams: [String: Any] { (json["error"] as? [String: Any])?["params"] as? [String: Any] ?? [:] }
}

/// A deliberately small HTTP/1.1 client over a raw socket, so the tests control every byte
/// (missing headers, odd content types, oversize bodies) and depend on nothing but libc.
struct HTTPClient: Sendable {
    let port: Int
    var host = "127.0.0.1"
    /// How long a request may wait for its answer (SO_RCVTIMEO).
    var timeoutSeconds = 60

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func get(_ path: String, token: String? = nil, headers: [String: String] = [:]) throws -> HTTPResult {
        try send("GET", path, token: token, headers: headers)
    }

    func post(_ path: String, token: String? = nil, json: String, headers: [String: String] = [:]) throws -> HTTPResult {
        var all = headers
        if all["Content-Type"] == nil { all["Content-Type"] = "application/json" }
        return try send("POST", path, token: token, headers: all, body: Array(json.utf8))
    }

    func delete(_ path: String, token: String? = nil, headers: [String: String] = [:]) throws -> HTTPResult {
        try send("DELETE", path, token: token, headers: headers)
    }

    /// Sends one request on a new connection (`Connection: close`) and reads the whole response.
    func send(_ method: String, _ path: String, token: String? = nil, headers: [String: String] = [:],
              body: [UInt8]? = nil) throws -> HTTPResult {
        let fd = try connect(timeoutSeconds: timeoutSeconds)
        defer { close(fd) }
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try writeAll(fd, Array(head.utf8) + (body ?? []))
        return try parse(readAll(fd))
    }

    /// Writes `bytes` as they are on a new connection and reads until the server closes it or
    /// `seconds` pass: the responses, and whether the server closed the connection.
    func raw(_ bytes: [UInt8], seconds: Int) throws -> (responses: [HTTPResult], closed: Bool) {
        let fd = try connect(timeoutSeconds: seconds)
        defer { close(fd) }
        try writeAll(fd, bytes)
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var closed = false
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 { data.append(contentsOf: buffer[0..<count]); continue }
            closed = count == 0 || errno == ECONNRESET
            break
        }
        var responses: [HTTPResult] = []
        var rest = data[...]
        while !rest.isEmpty, let response = try? parse(Array(rest)) {
            responses.append(response)
            let headEnd = (rest.startIndex..<max(rest.startIndex, rest.endIndex - 3))
                .first { Array(rest[$0..<$0 + 4]) == [13, 10, 13, 10] }!
            rest = rest[(headEnd + 4 + response.body.count)...]
        }
        return (responses, closed)
    }

    /// Opens a connection; throws when nothing listens.
    func connect(timeoutSeconds: Int = 60) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw Failure(description: "connect to \(port) failed: errno \(code)")
        }
        return fd
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written <= 0 {
                // The server may answer (413) and close before reading everything: stop writing.
                if offset > 0 { return }
                throw Failure(description: "write failed: errno \(errno)")
            }
            offset += written
        }
    }

    private func readAll(_ fd: Int32) throws -> [UInt8] {
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                data.append(contentsOf: buffer[0..<count])
            } else if count == 0 || !data.isEmpty {
                return data
            } else {
                throw Failure(description: "read failed: errno \(errno)")
            }
        }
    }

    private func parse(_ data: [UInt8]) throws -> HTTPResult {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = (0..<max(0, data.count - 3)).first(where: { Array(data[$0..<$0 + 4]) == separator }) else {
            throw Failure(description: "no HTTP response (\(data.count) bytes)")
        }
        let head = String(decoding: data[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(head[0])")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(data[(end + 4)...])
        if let length = headers["content-length"].flatMap(Int.init), body.count > length {
            body = Array(body[0..<length])
        }
        return HTTPResult(status: status, headers: headers, body: body)
    }
}

extension HTTPClient {
    /// This client, waiting up to `seconds` for each answer.
    func waiting(seconds: Int) -> HTTPClient {
        var client = self
        client.timeoutSeconds = seconds
        return client
    }

    /// Sends each request on a connection of its own and leaves it open: a crowd of long polls.
    /// `collect` reads the answers.
    func open(_ method: String, _ path: String, token: String? = nil, json: String? = nil) throws -> Int32 {
        let fd = try connect()
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        let body = json.map { Array($0.utf8) }
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        try writeAll(fd, Array(head.utf8) + (body ?? []))
        return fd
    }

    /// Reads the connections `open` made until each is closed or `seconds` pass, and closes them:
    /// each one's response, or nil for a connection closed without one (or still open then).
    func collect(_ fds: [Int32], seconds: Double) -> [HTTPResult?] {
        var data = [[UInt8]](repeating: [], count: fds.count)
        var open = Set(fds.indices)
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while !open.isEmpty, Date() < deadline {
            let order = Array(open)
            var polled = order.map { pollfd(fd: fds[$0], events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polled, nfds_t(polled.count), 100)
            guard ready > 0 else { continue }
            for (slot, index) in order.enumerated() where polled[slot].revents != 0 {
                let count = recv(fds[index], &buffer, buffer.count, 0)
                if count > 0 { data[index].append(contentsOf: buffer[0..<count]) } else { open.remove(index) }
            }
        }
        for fd in fds { close(fd) }
        return fds.indices.map { index in open.contains(index) ? nil : try? parse(data[index]) }
    }
}
