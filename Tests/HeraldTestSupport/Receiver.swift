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
/// refused (a receiver that is down), and no other test can take the port until `release()`.
final class DownPort: Sendable {
    let port: Int
    private let socket: Int32

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

    /// Frees the port for a receiver to listen on.
    func release() { close(socket) }
}
