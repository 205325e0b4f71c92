import Foundation
import Glibc
import HTTPServer
import Synchronization

/// A real local HTTP receiver for built-in delivery tests (libmicrohttpd, like Herald itself):
/// it records every request and answers what `answer` says for it.
final class Receiver: Sendable {
    struct Delivery: Sendable {
        let headers: [String: String]
        let body: [UInt8]
        let at: Date
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        var id: String { headers["webhook-id"] ?? "" }
    }

    /// What to answer: given the request and the requests that came before it.
    typealias Answer = @Sendable (Delivery, [Delivery]) -> Response

    private final class State: Sendable {
        let received = Mutex<[Delivery]>([])
        let answer: Mutex<Answer>
        init(_ answer: @escaping Answer) { self.answer = Mutex(answer) }
    }

    private let server: HTTPServer
    private let state: State

    /// `port` 0: an ephemeral one.
    init(port: Int = 0, answer: @escaping Answer = { _, _ in Response(status: 200) }) throws {
        let state = State(answer)
        self.state = state
        server = HTTPServer(configuration: .init(host: "127.0.0.1", port: port, threads: 8)) { request in
            let delivery = Delivery(headers: request.headers, body: request.body, at: Date())
            let earlier = state.received.withLock { list in
                defer { list.append(delivery) }
                return list
            }
            return state.answer.withLock { $0 }(delivery, earlier)
        }
        try server.start()
    }

    var url: String { "http://127.0.0.1:\(server.port)/hook" }
    var port: Int { server.port }
    var deliveries: [Delivery] { state.received.withLock { $0 } }

    func setAnswer(_ next: @escaping Answer) { state.answer.withLock { $0 = next } }

    func stop() { server.shutdown(drainTimeoutSeconds: 2) }
}

/// A loopback port held by a socket that is bound but not listening: connections to it are
/// refused (a receiver that is down). `comeUp()` starts listening on the same socket and answers
/// every request 200, counting them — the port is never let go, so nothing else can take it
/// between the two (a freed port can be taken by any outgoing connection's local end).
final class DownPort: Sendable {
    let port: Int
    private let socket: Int32
    private let served = Mutex(0)
    private let stopped = Atomic<Bool>(false)

    init() throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard fd >= 0, bound else { throw TestSetupError(message: "could not reserve a port") }
        socket = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Requests answered since `comeUp()`.
    var requests: Int { served.withLock { $0 } }

    /// Listens and answers each request `200` (one request per connection).
    func comeUp() {
        listen(socket, 64)
        let socket = self.socket
        Thread.detachNewThread { [self] in
            while !stopped.load(ordering: .relaxed) {
                let client = accept(socket, nil, nil)
                guard client >= 0 else { return }
                var received: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65_536)
                // The head, then as much body as Content-Length says.
                while true {
                    let count = read(client, &buffer, buffer.count)
                    if count <= 0 { break }
                    received.append(contentsOf: buffer[0..<count])
                    let text = String(decoding: received, as: UTF8.self)
                    guard let end = text.range(of: "\r\n\r\n") else { continue }
                    let head = text[..<end.lowerBound].lowercased()
                    let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                    if received.count - text[..<end.upperBound].utf8.count >= length { break }
                }
                let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
                _ = write(client, answer, answer.count)
                close(client)
                served.withLock { $0 += 1 }
            }
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(socket, Int32(SHUT_RDWR))
        close(socket)
    }
}
