import CMicroHTTPD
import Synchronization

/// Lets a responder answer later, from another thread, without holding a server thread: the
/// responder returns `Response.deferred`, the connection is suspended, and `complete(_:)`
/// resumes it with the real response (libmicrohttpd's suspend/resume).
///
/// `@unchecked Sendable`: the connection handle is used only under `state`'s lock, and
/// `MHD_resume_connection` may be called from any thread because the daemon runs with
/// inter-thread communication (`MHD_ALLOW_SUSPEND_RESUME`).
public final class Deferral: @unchecked Sendable {
    private struct State {
        var response: Response?
        var suspended = false
        var onComplete: (@Sendable (Response) -> Void)?
        /// Set by the server while the connection is suspended: forgets it (`HTTPServer.suspended`).
        var onResume: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    private let connection: OpaquePointer

    init(connection: OpaquePointer) {
        self.connection = connection
    }

    /// Called with the response when it is complete (for example to log it); at once if it is
    /// complete already (an answer can come before the responder has returned `.deferred`).
    public func onComplete(_ body: @escaping @Sendable (Response) -> Void) {
        let done = state.withLock { state -> Response? in
            if let response = state.response { return response }
            state.onComplete = body
            return nil
        }
        if let done { body(done) }
    }

    /// Answers the request; only the first call counts.
    public func complete(_ response: Response) {
        let (callback, resumed) = state.withLock { state -> ((@Sendable (Response) -> Void)?, (@Sendable () -> Void)?) in
            guard state.response == nil else { return (nil, nil) }
            state.response = response
            if state.suspended { MHD_resume_connection(connection) }
            defer { state.onResume = nil }
            return (state.onComplete, state.onResume)
        }
        resumed?()
        callback?(response)
    }

    /// After the responder returned `.deferred`: the response if it is complete already, else
    /// suspends the connection (under the lock, so that `complete` resumes it only afterwards).
    func suspendUnlessComplete(onResume: @escaping @Sendable () -> Void) -> Response? {
        state.withLock { state in
            if let response = state.response { return response }
            state.suspended = true
            state.onResume = onResume
            MHD_suspend_connection(connection)
            return nil
        }
    }

    /// The response, once complete.
    var response: Response? {
        state.withLock { $0.response }
    }
}

extension Response {
    /// Returned by a responder that will answer through `request.deferral`.
    public static let deferred = Response(status: 0)

    /// Whether this is `deferred`: the answer comes later.
    public var isDeferred: Bool { status == 0 }
}
