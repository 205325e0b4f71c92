import Foundation
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
