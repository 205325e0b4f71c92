import CMicroHTTPD
import CMicroHTTPDHooks
import Glibc
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd's thread pool.
///
/// Each request is read in full (bounded by `maxBodyBytes`), then handed to the responder on one
/// of the pool's threads. The responder may block (database calls): size `threads` by database
/// concurrency, not by cores.
///
/// `@unchecked Sendable`: the daemon handle is written by `start()` and `shutdown()` only, which
/// the owner calls one after the other (never at once), before and after the pool threads run;
/// everything the pool threads share is atomic or immutable.
public final class HTTPServer: @unchecked Sendable {
    /// Listening address and limits.
    public struct Configuration: Sendable {
        /// IPv4 or IPv6 address to bind (`127.0.0.1`, `0.0.0.0`, `::1`); `localhost` means 127.0.0.1.
        public var host: String
        /// Port; 0 picks a free one (read it back from `port`).
        public var port: Int
        /// Threads in libmicrohttpd's pool; each runs one blocking responder at a time.
        public var threads: Int
        /// The most open connections; beyond it a new connection closes the one that has waited
        /// longest for a request head (`ConnectionTable`).
        public var maxConnections: Int
        /// Seconds an idle keep-alive connection has to send its next request head.
        public var connectionTimeoutSeconds: Int
        /// Seconds a new connection has to send its first request head.
        public var headerTimeoutSeconds: Int
        /// The largest body accepted; a larger one is discarded and marked `bodyTooLarge`.
        public var maxBodyBytes: Int

        /// The defaults are `herald serve`'s (see `Configuration` in HeraldDomain).
        public init(host: String = "127.0.0.1", port: Int = 8080, threads: Int = 16,
                    maxConnections: Int = 1024, connectionTimeoutSeconds: Int = 60, headerTimeoutSeconds: Int = 10,
                    maxBodyBytes: Int = 4 * 1024 * 1024) {
            self.host = host
            self.port = port
            self.threads = threads
            self.maxConnections = maxConnections
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.headerTimeoutSeconds = headerTimeoutSeconds
            self.maxBodyBytes = maxBodyBytes
        }
    }

    /// Turns a request into a response; runs on a server thread and may block.
    public typealias Responder = @Sendable (Request) -> Response

    /// What the server was started with.
    public let configuration: Configuration
    let responder: Responder
    private var daemon: OpaquePointer?
    private var listenSocket: Int32 = -1
    private(set) public var port: Int = 0
    let inFlightCount = Atomic<Int>(0)
    let draining = Atomic<Bool>(false)
    let connections: ConnectionTable
    /// The requests whose connections wait suspended for a deferred answer, until it comes.
    let suspended = Mutex<[ObjectIdentifier: Deferral]>([:])

    /// A server that is not listening yet: `start()` binds and serves.
    public init(configuration: Configuration, responder: @escaping Responder) {
        self.configuration = configuration
        self.responder = responder
        connections = ConnectionTable(limit: max(1, configuration.maxConnections),
                                      headerTimeoutSeconds: max(1, configuration.headerTimeoutSeconds),
                                      idleTimeoutSeconds: max(1, configuration.connectionTimeoutSeconds))
    }

    /// Connections open now.
    public var openConnections: Int { connections.count }

    deinit {
        if let daemon { MHD_stop_daemon(daemon) }
    }

    /// Requests read but not yet completed.
    public var inFlight: Int { inFlightCount.load(ordering: .relaxed) }

    /// The answers libmicrohttpd gives by itself, before a request reaches Herald (a request head
    /// beyond its 32 KB per-connection memory, malformed chunking, an HTTP version it does not
    /// speak), in SPEC §3's JSON instead of the library's HTML (see `CMicroHTTPDHooks`).
    /// The same for every server in the process (the table is global), so the 413 names no
    /// limit: it answers chunk sizes that add up to more than the body limit (`framing.c` makes
    /// the library see them as a size beyond 64 bits), before any of those bytes arrive.
    static let libraryErrors: [(status: UInt32, error: HTTPError)] = [
        (400, .badRequest("the request is malformed (request line, header syntax, Content-Length or chunked framing)")),
        (413, HTTPError(status: 413, code: "ERR_PAYLOAD_TOO_LARGE", message: "the chunked body declares more bytes than the body limit")),
        (414, HTTPError(status: 414, code: "ERR_URI_TOO_LONG", message: "the request URI is too long")),
        (431, HTTPError(status: 431, code: "ERR_HEADERS_TOO_LARGE", message: "the request headers are too large")),
        (505, .badRequest("only HTTP/1.0 and HTTP/1.1 are served")),
        (0, .badRequest("the request was refused")),
        (1, .internalError),
    ]

    private static func registerLibraryErrorBodies() {
        for (status, error) in libraryErrors {
            var body = error.response.body
            body.append(UInt8(ascii: "\n"))
            body.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { herald_set_error_body(status, $0.baseAddress, $0.count) }
            }
        }
    }

    /// Raises the soft limit of open files toward `wanted` (at most the hard limit): every
    /// connection is a descriptor, and the usual soft limit of 1,024 would refuse connections
    /// long before `maxConnections`.
    static func raiseOpenFileLimit(to wanted: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(wanted) else { return }
        limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// Binds the socket and starts the thread pool.
    public func start() throws {
        precondition(daemon == nil, "server already started")
        let socket = try Self.bindListeningSocket(host: configuration.host, port: configuration.port)
        listenSocket = socket.fd
        port = socket.port
        Self.registerLibraryErrorBodies()
        Self.raiseOpenFileLimit(to: configuration.maxConnections + max(16, configuration.maxConnections / 8) + 1024)

        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: MHD_OPTION.LISTEN_SOCKET, value: Int(socket.fd), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.THREAD_POOL_SIZE, value: max(1, configuration.threads), ptr_value: nil),
            // Room above the limit, so that a new connection is accepted and can close a slow one.
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_LIMIT,
                           value: max(1, configuration.maxConnections) + max(16, configuration.maxConnections / 8), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_TIMEOUT, value: max(1, configuration.connectionTimeoutSeconds), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.NOTIFY_CONNECTION, value: unsafeBitCast(connectionNotifyCallback, to: Int.self),
                           ptr_value: Unmanaged.passUnretained(self).toOpaque()),
            MHD_OptionItem(option: MHD_OPTION.NOTIFY_COMPLETED, value: unsafeBitCast(requestCompletedCallback, to: Int.self),
                           ptr_value: Unmanaged.passUnretained(self).toOpaque()),
            MHD_OptionItem(option: MHD_OPTION.UNESCAPE_CALLBACK, value: unsafeBitCast(unescapeCallback, to: Int.self), ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil),
        ]
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
        let context = Unmanaged.passUnretained(self).toOpaque()
        let started = options.withUnsafeMutableBufferPointer { buffer -> OpaquePointer? in
            withVaList([Int32(MHD_OPTION.ARRAY.rawValue), OpaquePointer(buffer.baseAddress!), Int32(MHD_OPTION.END.rawValue)]) { arguments in
                MHD_start_daemon_va(UInt32(flags), 0, nil, nil, accessHandlerCallback, context, arguments)
            }
        }
        guard let started else {
            close(socket.fd)
            throw HTTPServerError(message: "libmicrohttpd could not start on \(configuration.host):\(configuration.port)")
        }
        daemon = started
        connections.start()
    }

    /// Graceful stop: stops accepting, lets requests in flight finish (up to `drainTimeoutSeconds`),
    /// then closes every connection and stops the threads.
    public func shutdown(drainTimeoutSeconds: Double = 30) {
        guard let daemon else { return }
        draining.store(true, ordering: .sequentiallyConsistent)
        let socket = MHD_quiesce_daemon(daemon)
        if socket >= 0 { close(socket) }
        var waited = 0.0
        while inFlight > 0 && waited < drainTimeoutSeconds {
            usleep(10_000)
            waited += 0.01
        }
        // Deferred answers that did not come in time (a round stuck on a lock): 503, so that no
        // connection is left suspended when the daemon stops (libmicrohttpd forbids it), and the
        // threads a moment to send them.
        let late = suspended.withLock { Array($0.values) }
        for deferral in late { deferral.complete(HTTPError.unavailable().response) }
        waited = 0
        while !late.isEmpty && inFlight > 0 && waited < 1 {
            usleep(10_000)
            waited += 0.01
        }
        MHD_stop_daemon(daemon)
        connections.stop()
        self.daemon = nil
    }

    private static func bindListeningSocket(host: String, port: Int) throws -> (fd: Int32, port: Int) {
        let address = host == "localhost" ? "127.0.0.1" : host
        let isIPv6 = address.contains(":")
        let fd = socket(isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError(message: "socket() failed: errno \(errno)") }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var bound: Int32
        if isIPv6 {
            var addr = sockaddr_in6()
            addr.sin6_family = sa_family_t(AF_INET6)
            addr.sin6_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET6, address, &addr.sin6_addr) == 1 else {
                close(fd)
                throw HTTPServerError(message: "invalid listen address \(host)")
            }
            bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = UInt16(port).bigEndian
            guard inet_pton(AF_INET, address, &addr.sin_addr) == 1 else {
                close(fd)
                throw HTTPServerError(message: "invalid listen address \(host)")
            }
            bound = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw HTTPServerError(message: "cannot bind \(host):\(port): \(String(cString: strerror(code)))")
        }
        guard listen(fd, 1024) == 0 else {
            close(fd)
            throw HTTPServerError(message: "listen() failed: errno \(errno)")
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let actualPort: UInt16 = withUnsafePointer(to: &storage) { pointer in
            if isIPv6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        return (fd, Int(actualPort))
    }
}

/// The server could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// What failed, for the log.
    public let message: String
    /// The message.
    public var description: String { message }
}

// MARK: - libmicrohttpd callbacks

/// State of one request between libmicrohttpd's callbacks, kept in `*con_cls` through `Unmanaged`
/// and released in the request-completed callback.
private final class RequestState {
    var body: [UInt8] = []
    var bodyTooLarge = false
    let startedAt: UInt64
    /// Set while the responder answers later; the request id to send with that answer.
    var deferral: Deferral?
    var requestID = ""

    init(startedAt: UInt64) { self.startedAt = startedAt }
}

/// Collects headers or query arguments through `MHD_get_connection_values`.
private final class ValueCollector {
    var values: [String: String] = [:]
    let lowercaseKeys: Bool
    init(lowercaseKeys: Bool) { self.lowercaseKeys = lowercaseKeys }
}

private let collectValue: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let collector = Unmanaged<ValueCollector>.fromOpaque(cls).takeUnretainedValue()
    var name = String(cString: key)
    if collector.lowercaseKeys { name = name.lowercased() }
    let text = value.map { String(cString: $0) } ?? ""
    if collector.lowercaseKeys, let existing = collector.values[name] {
        collector.values[name] = existing + ", " + text
    } else if collector.values[name] == nil {
        collector.values[name] = text
    }
    return .YES
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

private func makeRequestID(_ supplied: String?) -> String {
    if let supplied, !supplied.isEmpty, supplied.utf8.count <= 64,
       supplied.utf8.allSatisfy({ byte in
           (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a)
               || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
       }) {
        return supplied
    }
    var generator = SystemRandomNumberGenerator()
    let value: UInt64 = generator.next()
    let hex = String(value, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
}

private let accessHandlerCallback: MHD_AccessHandlerCallback = { cls, connection, url, method, _, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let conCls, let uploadDataSize else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()

    // First call: headers only. Answering here makes libmicrohttpd close the connection after
    // the answer (it has not read the body, so it cannot keep the connection): right for a request whose framing is refused, so that no byte
    // of its body is read as another request; any other is answered on a later call.
    guard let statePointer = conCls.pointee else {
        server.connections.busy(connection)
        switch framing(connection, maxBodyBytes: server.configuration.maxBodyBytes) {
        case .refused(let error):
            var response = error.response
            response.headers.append(("Connection", "close"))
            return queue(response, requestID: makeRequestID(nil), server: server, connection: connection)
        case .tooLarge:
            // Answered now, without reading a body that will be refused, but through the
            // responder, so that the route, the token and the role are checked first (a request
            // without a valid key gets 401, not 413) and the request is logged.
            let request = makeRequest(connection, url: url, method: method, body: [], bodyTooLarge: true,
                                      startedAt: monotonicNanoseconds(), deferral: nil)
            var response = server.responder(request)
            response.headers.append(("Connection", "close"))
            return queue(response, requestID: request.id, server: server, connection: connection)
        case .fine:
            break
        }
        let state = RequestState(startedAt: monotonicNanoseconds())
        conCls.pointee = Unmanaged.passRetained(state).toOpaque()
        server.inFlightCount.add(1, ordering: .relaxed)
        return .YES
    }
    let state = Unmanaged<RequestState>.fromOpaque(statePointer).takeUnretainedValue()

    // Body chunks: keep up to the limit, discard the rest.
    if uploadDataSize.pointee > 0 {
        let count = uploadDataSize.pointee
        if !state.bodyTooLarge, let uploadData {
            if state.body.count + count > server.configuration.maxBodyBytes {
                state.bodyTooLarge = true
                state.body = []
            } else {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: count) { bytes in
                    state.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: count))
                }
            }
        }
        uploadDataSize.pointee = 0
        return .YES
    }

    // A deferred answer is ready: the connection was resumed.
    if let deferral = state.deferral {
        guard let response = deferral.response else { return .YES }
        return queue(response, requestID: state.requestID, server: server, connection: connection)
    }

    // Last call: the whole request is here.
    server.connections.answering(connection)
    let request = makeRequest(connection, url: url, method: method, body: state.body, bodyTooLarge: state.bodyTooLarge,
                              startedAt: state.startedAt, deferral: Deferral(connection: connection))
    state.body = []
    let response = server.responder(request)
    if response.isDeferred, let deferral = request.deferral {
        state.deferral = deferral
        state.requestID = request.id
        let key = ObjectIdentifier(deferral)
        server.suspended.withLock { $0[key] = deferral }
        guard let ready = deferral.suspendUnlessComplete(onResume: { [weak server] in
            _ = server?.suspended.withLock { $0.removeValue(forKey: key) }
        }) else { return .YES }
        server.suspended.withLock { _ = $0.removeValue(forKey: key) }
        return queue(ready, requestID: request.id, server: server, connection: connection)
    }
    return queue(response, requestID: request.id, server: server, connection: connection)
}

/// The request as the responder sees it, from libmicrohttpd's view of the connection.
private func makeRequest(_ connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, body: [UInt8],
                         bodyTooLarge: Bool, startedAt: UInt64, deferral: Deferral?) -> Request {
    let headers = ValueCollector(lowercaseKeys: true)
    let query = ValueCollector(lowercaseKeys: false)
    MHD_get_connection_values(connection, .HEADER_KIND, collectValue, Unmanaged.passUnretained(headers).toOpaque())
    MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, collectValue, Unmanaged.passUnretained(query).toOpaque())
    return Request(
        method: method.map { HTTPMethod(String(cString: $0)) } ?? .get,
        path: url.map { String(cString: $0) } ?? "/",
        query: query.values,
        headers: headers.values,
        body: body,
        bodyTooLarge: bodyTooLarge,
        id: makeRequestID(headers.values["x-request-id"]),
        startedAt: startedAt,
        deferral: deferral,
        invalidPathSegments: url.map(invalidUTF8Segments) ?? []
    )
}

/// Sends a response with the request id (and `Connection: close` while draining).
private func queue(_ original: Response, requestID: String, server: HTTPServer, connection: OpaquePointer) -> MHD_Result {
    var response = original
    // JSON ends with a newline, so that one curl's output does not run into the next prompt.
    if response.body.last.map({ $0 != UInt8(ascii: "\n") }) ?? false,
       response.header("Content-Type")?.hasPrefix("application/json") ?? false {
        response.body.append(UInt8(ascii: "\n"))
    }
    response.headers.append(("X-Request-Id", requestID))
    if server.draining.load(ordering: .relaxed) {
        response.headers.append(("Connection", "close"))
    }

    let count = response.body.count
    let mhdResponse = response.body.withUnsafeBytes { bytes in
        MHD_create_response_from_buffer(count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
    }
    guard let mhdResponse else { return .NO }
    for header in response.headers {
        MHD_add_response_header(mhdResponse, header.name, header.value)
    }
    let queued = herald_queue_response(connection, UInt32(response.status), mhdResponse)
    MHD_destroy_response(mhdResponse)
    return queued
}

private let requestCompletedCallback: MHD_RequestCompletedCallback = { cls, connection, conCls, _ in
    if let cls, let connection { Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().connections.idle(connection) }
    guard let conCls, let pointer = conCls.pointee else { return }
    Unmanaged<RequestState>.fromOpaque(pointer).release()
    conCls.pointee = nil
    if let cls {
        Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().inFlightCount.subtract(1, ordering: .relaxed)
    }
}

private let connectionNotifyCallback: MHD_NotifyConnectionCallback = { cls, connection, _, code in
    guard let cls, let connection else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let fd = herald_connection_fd(connection)
    switch code.rawValue {
    case 0:   // MHD_CONNECTION_NOTIFY_STARTED
        // Chunk sizes are followed from the first byte (CMicroHTTPDHooks/framing.c).
        herald_track_connection(fd, UInt64(max(0, server.configuration.maxBodyBytes)))
        server.connections.opened(connection, fd: fd)
    case 1:   // MHD_CONNECTION_NOTIFY_CLOSED
        server.connections.closed(connection)
        herald_untrack_connection(fd)
    default: break
    }
}

private enum Framing {
    case fine
    /// Ambiguous framing: a 400 that closes the connection, before anything else.
    case refused(HTTPError)
    /// A declared body above the limit.
    case tooLarge
}

/// The request's body framing, judged from its headers before any of the body is read (RFC 9112
/// §6.3): several different Content-Length values, Content-Length with Transfer-Encoding (request
/// smuggling) or a Content-Length that is not a number are refused; one above the body limit is
/// answered 413 at once instead of reading, or waiting for, a body that will be refused.
private func framing(_ connection: OpaquePointer, maxBodyBytes: Int) -> Framing {
    let framingHeaders = headerValues(connection, ["content-length", "transfer-encoding"])
    let lengths = framingHeaders["content-length"] ?? [], encodings = framingHeaders["transfer-encoding"] ?? []
    // Only one coding is understood, and only once (RFC 9112 §6.1): anything else has no
    // length a server can rely on.
    // libmicrohttpd takes the body as chunked only for this exact value (its leading blanks
    // dropped): any other would be read as a body without length.
    if !encodings.isEmpty && (encodings.count > 1 || encodings[0].lowercased() != "chunked") {
        return .refused(.badRequest("Transfer-Encoding must be chunked, once", field: "Transfer-Encoding"))
    }
    guard !lengths.isEmpty else { return .fine }
    if !encodings.isEmpty {
        return .refused(.badRequest("a request may not have both Content-Length and Transfer-Encoding", field: "Content-Length"))
    }
    // A repeated header may also come as one comma-separated list.
    func trimmed(_ text: Substring) -> Substring {
        var slice = text
        while let first = slice.first, first == " " || first == "\t" { slice.removeFirst() }
        while let last = slice.last, last == " " || last == "\t" { slice.removeLast() }
        return slice
    }
    let values = lengths.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map { String(trimmed($0)) }
    guard values.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }) else {
        return .refused(.badRequest("Content-Length must be a decimal number", field: "Content-Length"))
    }
    guard Set(values).count == 1, let length = values.first else {
        return .refused(.badRequest("Content-Length values differ", field: "Content-Length"))
    }
    let digits = length.drop { $0 == "0" }
    if digits.count > 18 || (Int(digits) ?? 0) > maxBodyBytes { return .tooLarge }
    return .fine
}

/// Every value of the headers `names` (lowercase), in order, duplicates included, in one pass.
private func headerValues(_ connection: OpaquePointer, _ names: Set<String>) -> [String: [String]] {
    final class Found { var values: [String: [String]] = [:]; let names: Set<String>; init(_ names: Set<String>) { self.names = names } }
    let found = Found(names)
    MHD_get_connection_values(connection, .HEADER_KIND, { cls, _, key, value in
        guard let cls, let key else { return .YES }
        let found = Unmanaged<Found>.fromOpaque(cls).takeUnretainedValue()
        let name = String(cString: key).lowercased()
        if found.names.contains(name) { found.values[name, default: []].append(value.map { String(cString: $0) } ?? "") }
        return .YES
    }, Unmanaged.passUnretained(found).toOpaque())
    return found.values
}

/// Percent-decoding of the path and query, as libmicrohttpd's own, except that `%00` becomes the
/// byte 0xFF: the path reaches Herald as a C string, so a decoded NUL would end it there and
/// `/v1/settings/token-keys/tk_1%00x` would name `tk_1`. 0xFF is never valid UTF-8, so the segment
/// is refused (`invalidPathSegments`) and a query value holds U+FFFD.
private let unescapeCallback: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafeMutablePointer<CChar>?) -> Int = { _, _, text in
    guard let text else { return 0 }
    var cursor = text
    while cursor.pointee != 0 {
        if cursor.pointee == CChar(UInt8(ascii: "%")), cursor[1] == CChar(UInt8(ascii: "0")), cursor[2] == CChar(UInt8(ascii: "0")) {
            cursor[1] = CChar(UInt8(ascii: "F"))
            cursor[2] = CChar(UInt8(ascii: "F"))
            cursor += 3
        } else {
            cursor += 1
        }
    }
    return Int(MHD_http_unescape(text))
}

/// The segments of a percent-decoded path that are not valid UTF-8 (libmicrohttpd decodes `%FF`
/// to the byte 0xFF; Swift's `String(cString:)` would turn it into U+FFFD, so `%FF` and `%C0`
/// would name the same user).
private func invalidUTF8Segments(_ url: UnsafePointer<CChar>) -> [Int] {
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(url).assumingMemoryBound(to: UInt8.self), count: strlen(url))
    if bytes.allSatisfy({ $0 < 0x80 }) { return [] }
    var parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    if parts.first?.isEmpty == true { parts.removeFirst() }
    return parts.enumerated().compactMap { String(validating: $0.element, as: UTF8.self) == nil ? $0.offset : nil }
}
