import CCurl
import Glibc
import Locking

/// One outbound HTTP POST.
public struct OutboundRequest: Sendable {
    public var url: String
    /// `Name: value` lines, sent as given.
    public var headers: [String]
    public var body: [UInt8]
    /// The whole exchange (connect, send, answer) must end within this time.
    public var timeoutMs: Int
    /// The body's media type (`Content-Type`).
    public var contentType: String
    /// Speak HTTP/2 (over TLS, negotiated by ALPN), as APNs requires; requests to one host then
    /// share a connection as concurrent streams.
    public var http2: Bool

    public init(url: String, headers: [String], body: [UInt8], timeoutMs: Int, contentType: String = "application/json",
                http2: Bool = false) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
        self.contentType = contentType
        self.http2 = http2
    }
}

/// What came back: a status, or why there was none.
public struct OutboundResponse: Sendable {
    public enum Failure: Sendable, Equatable {
        /// No complete answer within the request's timeout.
        case timeout
        /// The connection could not be made (refused, unreachable, the name did not resolve).
        case connect(String)
        /// Anything else: TLS verification, a broken connection, a malformed answer.
        case other(String)
        /// Not sent: `perform`'s `shouldStart` said no before its turn came.
        case notSent
        /// Not connected: every address the host resolved to is internal (`OutboundAddress`),
        /// and the client does not allow those. Nothing was sent and nothing was read.
        case refusedAddress
    }

    /// The HTTP status; 0 when `failure` is set.
    public var status: Int
    /// The `Retry-After` header, as sent.
    public var retryAfter: String?
    /// The first `HTTPClient.maxBodyBytes` of the answer's body.
    public var body: [UInt8]
    public var failure: Failure?
    /// From the start of the request to its end.
    public var seconds: Double

    public init(status: Int, retryAfter: String?, body: [UInt8], failure: Failure?, seconds: Double) {
        self.status = status
        self.retryAfter = retryAfter
        self.body = body
        self.failure = failure
        self.seconds = seconds
    }
}

/// An HTTP client over libcurl's multi interface: one thread drives many requests at once (one
/// client per delivering app), over connections kept open between calls (libcurl's connection cache, shared by the multi handle).
/// TLS peers are verified (libcurl's defaults, with the system's CA bundle); only http and https
/// URLs are followed, and no redirect is. Unless allowed, no connection is made to an internal
/// address (`OutboundAddress.isInternal`): each address libcurl is about to connect to is judged
/// in its open-socket callback, after the name was resolved, so a name that resolves to one at
/// sending time (DNS rebinding) is refused as a literal address is.
///
/// This module holds every call into libcurl. `perform` runs under a lock: one batch at a time.
public final class HTTPClient: @unchecked Sendable {
    /// The part of an answer's body kept (a receiver's `{"invalidDevices": […]}`, a gorush log);
    /// the rest is read and dropped, so a hostile receiver cannot make Herald hold much.
    public static let maxBodyBytes = 64 * 1024

    public enum Progress {
        case started(Int)
        case finished(Int, OutboundResponse)
    }

    private final class State {
        let multi: UnsafeMutableRawPointer
        var idle: [UnsafeMutableRawPointer] = []
        init(multi: UnsafeMutableRawPointer) { self.multi = multi }
    }

    /// One transfer in progress: what the callbacks write into, through `Unmanaged`.
    private final class Transfer {
        let index: Int
        let started: UInt64
        var body: [UInt8] = []
        var retryAfter: String?
        var headers: UnsafeMutablePointer<curl_slist>?
        /// Set when the open-socket callback refused an internal address.
        var refusedAddress = false
        init(index: Int) {
            self.index = index
            started = Self.now()
        }
        static func now() -> UInt64 {
            var spec = timespec()
            clock_gettime(CLOCK_MONOTONIC, &spec)
            return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
        }
    }

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    private let state: Lock<State>
    private let userAgent: String
    private let allowInternalAddresses: Bool
    private let caFile: String?
    private let httpsOnly: Bool

    /// `maxConnections`: connections kept open for reuse, across every host.
    /// `allowInternalAddresses`: connect to loopback, private and other internal addresses too
    /// (tests, closed networks). `caFile`: a PEM file of certificate authorities trusted besides
    /// the system's (`HERALD_DELIVERY_CA_FILE`). `httpsOnly`: refuse `http` URLs.
    public init(userAgent: String, maxConnections: Int = 256, allowInternalAddresses: Bool = false, caFile: String? = nil,
                httpsOnly: Bool = false) {
        _ = Self.initialized
        let multi = curl_multi_init()!
        _ = herald_curl_multi_set_long(multi, CURLMOPT_MAXCONNECTS, maxConnections)
        // HTTP/2 requests to one host share a connection as streams
        _ = herald_curl_multi_set_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        state = Lock(State(multi: multi))
        self.userAgent = userAgent
        self.allowInternalAddresses = allowInternalAddresses
        self.caFile = caFile
        self.httpsOnly = httpsOnly
    }

    deinit {
        state.withLock { state in
            for handle in state.idle { curl_easy_cleanup(handle) }
            curl_multi_cleanup(state.multi)
        }
    }

    /// Sends every request, at most `concurrency` at a time, starting them in order; returns the
    /// answers in the requests' order. `prepare` may change a request just before it starts (a
    /// signature over the time it is sent); `progress` hears each start and end, on the calling
    /// thread. Once `shouldStart` says no, requests not started yet are answered `.notSent`
    /// (those in flight finish).
    public func perform(_ requests: [OutboundRequest], concurrency: Int, shouldStart: () -> Bool = { true },
                        prepare: (Int, inout OutboundRequest) -> Void = { _, _ in },
                        progress: (Progress) -> Void = { _ in }) -> [OutboundResponse] {
        state.withLock { state in
            run(requests, concurrency: max(1, concurrency), shouldStart: shouldStart, prepare: prepare, progress: progress, state: state)
        }
    }

    private func run(_ requests: [OutboundRequest], concurrency: Int, shouldStart: () -> Bool,
                     prepare: (Int, inout OutboundRequest) -> Void, progress: (Progress) -> Void,
                     state: State) -> [OutboundResponse] {
        var results = [OutboundResponse?](repeating: nil, count: requests.count)
        var next = 0   // the first request not started
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        var remaining = requests.count

        func fail(_ index: Int, _ failure: OutboundResponse.Failure) {
            results[index] = OutboundResponse(status: 0, retryAfter: nil, body: [], failure: failure, seconds: 0)
            remaining -= 1
        }

        func fill() {
            guard shouldStart() else {
                while next < requests.count { fail(next, .notSent); next += 1 }   // the rest stays unsent
                return
            }
            while next < requests.count, active.count < concurrency {
                let index = next
                next += 1
                let transfer = Transfer(index: index)
                let handle = state.idle.popLast() ?? curl_easy_init()!
                var request = requests[index]
                prepare(index, &request)
                if let failure = configure(handle, request, transfer) {
                    fail(index, failure)
                    release(handle, transfer, state: state, removeFromMulti: false)
                    continue
                }
                guard curl_multi_add_handle(state.multi, handle) == CURLM_OK else {
                    fail(index, .other("could not start the request"))
                    release(handle, transfer, state: state, removeFromMulti: false)
                    continue
                }
                active[handle] = transfer
                progress(.started(index))
            }
        }

        fill()
        while remaining > 0 {
            var stillRunning: Int32 = 0
            curl_multi_perform(state.multi, &stillRunning)
            var left: Int32 = 0
            var finishedAny = false
            while let message = curl_multi_info_read(state.multi, &left) {
                var easy: UnsafeMutableRawPointer?
                var code = CURLE_OK
                guard herald_curl_done(message, &easy, &code) != 0, let handle = easy, let transfer = active.removeValue(forKey: handle) else {
                    continue
                }
                let response = finish(handle, transfer, code: code)
                results[transfer.index] = response
                remaining -= 1
                release(handle, transfer, state: state, removeFromMulti: true)
                progress(.finished(transfer.index, response))
                finishedAny = true
            }
            if finishedAny { fill() }
            if remaining > 0, !finishedAny {
                var events: Int32 = 0
                curl_multi_poll(state.multi, nil, 0, 100, &events)
            }
        }
        return results.map { $0! }
    }

    /// Sets a handle up for one request; a failure here (a malformed URL) is the request's answer.
    private func configure(_ handle: UnsafeMutableRawPointer, _ request: OutboundRequest, _ transfer: Transfer) -> OutboundResponse.Failure? {
        curl_easy_reset(handle)
        var headers: UnsafeMutablePointer<curl_slist>?
        // No `Expect: 100-continue` round trip before larger bodies.
        for line in request.headers + ["Expect:", "Content-Type: " + request.contentType] {
            headers = curl_slist_append(headers, line)
        }
        transfer.headers = headers
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        var code = herald_curl_set_pointer(handle, CURLOPT_URL, request.url)
        guard code == CURLE_OK else { return .other("the URL is not valid") }
        code = herald_curl_set_pointer(handle, CURLOPT_PROTOCOLS_STR, httpsOnly ? "https" : "http,https")
        if request.http2 {
            _ = herald_curl_set_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
            _ = herald_curl_set_long(handle, CURLOPT_PIPEWAIT, 1)   // wait for a connection to multiplex on
        }
        // the system's authorities stay trusted through the default CA path
        if let caFile { _ = herald_curl_set_pointer(handle, CURLOPT_CAINFO, caFile) }
        _ = herald_curl_set_pointer(handle, CURLOPT_USERAGENT, userAgent)
        _ = herald_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = herald_curl_set_long(handle, CURLOPT_TCP_KEEPALIVE, 1)
        _ = herald_curl_set_long(handle, CURLOPT_TIMEOUT_MS, max(1, request.timeoutMs))
        _ = herald_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, max(1, request.timeoutMs))
        _ = herald_curl_set_long(handle, CURLOPT_POST, 1)
        _ = herald_curl_set_offset(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
        request.body.withUnsafeBytes { bytes in
            // copied by libcurl: the bytes need not outlive this call
            _ = herald_curl_set_pointer(handle, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1))
        }
        _ = herald_curl_set_pointer(handle, CURLOPT_HTTPHEADER, UnsafeRawPointer(headers))
        _ = herald_curl_set_callback(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            let room = HTTPClient.maxBodyBytes - transfer.body.count
            if room > 0, let data {
                data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                    transfer.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: min(room, length)))
                }
            }
            return length
        }
        _ = herald_curl_set_pointer(handle, CURLOPT_WRITEDATA, context)
        _ = herald_curl_set_callback(handle, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard let data else { return length }
            let line = data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
            }
            if line.hasPrefix("HTTP/") {
                transfer.retryAfter = nil   // a new answer (after a 1xx): its own headers
            } else if let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == "retry-after" {
                transfer.retryAfter = String(line[line.index(after: colon)...].trimmingWhitespace())
            }
            return length
        }
        _ = herald_curl_set_pointer(handle, CURLOPT_HEADERDATA, context)
        if !allowInternalAddresses {
            _ = herald_curl_set_opensocket(handle) { context, _, address in
                guard let context, let address else { return CURL_SOCKET_BAD }
                let family = address.pointee.family
                let addressOffset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
                guard let bytes = OutboundAddress.bytes(family: family, sockaddr: UnsafeRawPointer(address) + addressOffset),
                      !OutboundAddress.isInternal(bytes) else {
                    // libcurl tries the host's other addresses, if any; the transfer fails only
                    // when none was public.
                    Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().refusedAddress = true
                    return CURL_SOCKET_BAD
                }
                return socket(family, address.pointee.socktype, address.pointee.protocol)
            }
            _ = herald_curl_set_pointer(handle, CURLOPT_OPENSOCKETDATA, context)
        }
        return code == CURLE_OK ? nil : .other(httpsOnly ? "the URL's scheme is not https" : "the URL's scheme is not http or https")
    }

    private func finish(_ handle: UnsafeMutableRawPointer, _ transfer: Transfer, code: CURLcode) -> OutboundResponse {
        let seconds = Double(Transfer.now() - transfer.started) / 1e9
        guard code == CURLE_OK else {
            if transfer.refusedAddress {
                return OutboundResponse(status: 0, retryAfter: nil, body: [], failure: .refusedAddress, seconds: seconds)
            }
            let message = String(cString: curl_easy_strerror(code))
            let failure: OutboundResponse.Failure = switch code {
            case CURLE_OPERATION_TIMEDOUT: .timeout
            case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .connect(message)
            default: .other(message)
            }
            return OutboundResponse(status: 0, retryAfter: nil, body: [], failure: failure, seconds: seconds)
        }
        var status = 0
        _ = herald_curl_get_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return OutboundResponse(status: status, retryAfter: transfer.retryAfter, body: transfer.body, failure: nil, seconds: seconds)
    }

    private func release(_ handle: UnsafeMutableRawPointer, _ transfer: Transfer, state: State, removeFromMulti: Bool) {
        if removeFromMulti { curl_multi_remove_handle(state.multi, handle) }
        curl_slist_free_all(transfer.headers)
        transfer.headers = nil
        state.idle.append(handle)
    }
}

extension Substring {
    func trimmingWhitespace() -> Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        // "\r\n" is one Character (one grapheme cluster), so it is named as well.
        while let last = text.last, last == " " || last == "\t" || last == "\r" || last == "\n" || last == "\r\n" { text.removeLast() }
        return text
    }
}
