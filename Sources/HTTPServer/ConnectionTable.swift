import Dispatch
import Glibc
import Locking
import Synchronization

/// The open connections, so that slow clients cannot take the server away from the others.
///
/// libmicrohttpd's own timeout is an idle timeout: a client that sends one byte every few seconds
/// keeps its connection for ever, and about a thousand of them fill the connection table, after
/// which every new request waits in the kernel's backlog. So the server keeps its own table:
/// - a connection must send a whole request head within `headerTimeout` of opening, the next one
///   within `idleTimeout` of its previous answer, and a body within `idleTimeout` of its head
///   (deadlines, however slowly it keeps sending);
/// - when more than `limit` connections are open, a new one shuts down the connection that has
///   waited longest for a request head (a new one first, then an idle keep-alive one).
/// A connection whose request is being answered is never touched. Shutting down the
/// socket makes libmicrohttpd see the end of the stream and close the connection itself.
final class ConnectionTable: Sendable {
    struct Entry {
        let fd: Int32
        /// When the connection began waiting for a request head or reading a body; nil while a
        /// request is being answered.
        var waitingSince: UInt64?
        /// Whether it waits for its first request head (the header deadline).
        var fresh: Bool
        /// Whether it is reading a body (not a candidate to make room: it is doing work).
        var reading = false
        var closing = false
    }

    let limit: Int
    let headerTimeout: UInt64
    let idleTimeout: UInt64
    private let entries = Lock<[Int: Entry]>([:])
    private let running = Atomic<Bool>(false)

    init(limit: Int, headerTimeoutSeconds: Int, idleTimeoutSeconds: Int) {
        self.limit = limit
        headerTimeout = UInt64(headerTimeoutSeconds) * 1_000_000_000
        idleTimeout = UInt64(idleTimeoutSeconds) * 1_000_000_000
    }

    /// Looks for connections past their deadline four times a second, on a thread of its own.
    func start() {
        guard !running.exchange(true, ordering: .relaxed) else { return }
        DispatchQueue(label: "herald.http.deadlines").async { [self] in
            while running.load(ordering: .relaxed) {
                usleep(250_000)
                closeLate()
            }
        }
    }

    func stop() { running.store(false, ordering: .relaxed) }

    private static func key(_ connection: OpaquePointer) -> Int { Int(bitPattern: UnsafeRawPointer(connection)) }

    /// Connections open, for tests and metrics.
    var count: Int { entries.withLock { $0.count } }

    func opened(_ connection: OpaquePointer, fd: Int32) {
        let now = monotonicNanoseconds()
        entries.withLock { entries in
            entries[Self.key(connection)] = Entry(fd: fd, waitingSince: now, fresh: true)
            guard entries.count > limit else { return }
            // Full: make room by closing the one that has waited longest for a request head.
            // Order: connections that never sent a request head first, then idle keep-alive ones;
            // the longest waiting first.
            var oldest: (key: Int, rank: Int, since: UInt64)?
            for (key, entry) in entries where !entry.closing && !entry.reading && key != Self.key(connection) {
                guard let since = entry.waitingSince else { continue }
                let rank = entry.fresh ? 0 : 1
                if let best = oldest, (best.rank, best.since) <= (rank, since) { continue }
                oldest = (key, rank, since)
            }
            if let oldest { Self.shut(&entries, oldest.key) }
        }
    }

    /// The request head is complete: the body is read next, within `idleTimeout`.
    func busy(_ connection: OpaquePointer) {
        set(connection, waiting: true, reading: true)
    }

    /// The whole request is read: it is being answered.
    func answering(_ connection: OpaquePointer) {
        set(connection, waiting: false, reading: false)
    }

    /// The request was answered: the connection waits for its next request head.
    func idle(_ connection: OpaquePointer) {
        set(connection, waiting: true, reading: false)
    }

    /// A known connection's state after its first request head: waiting (for a body or the next
    /// head) since now, or not waiting while it is answered.
    private func set(_ connection: OpaquePointer, waiting: Bool, reading: Bool) {
        let now = monotonicNanoseconds()
        entries.withLock { entries in
            let key = Self.key(connection)
            guard entries[key] != nil else { return }
            entries[key]!.waitingSince = waiting ? now : nil
            entries[key]!.fresh = false
            entries[key]!.reading = reading
        }
    }

    /// libmicrohttpd closes the connection (before it closes the socket, so the fd is still ours).
    func closed(_ connection: OpaquePointer) {
        _ = entries.withLock { $0.removeValue(forKey: Self.key(connection)) }
    }

    /// Shuts down every connection past its deadline.
    func closeLate() {
        entries.withLock { entries in
            // The clock is read under the lock: a time stored after it would be later than `now`.
            let now = monotonicNanoseconds()
            for (key, entry) in entries where !entry.closing {
                guard let since = entry.waitingSince, now > since else { continue }
                if now - since > (entry.fresh ? headerTimeout : idleTimeout) { Self.shut(&entries, key) }
            }
        }
    }

    private static func shut(_ entries: inout [Int: Entry], _ key: Int) {
        guard let entry = entries[key] else { return }
        shutdown(entry.fd, Int32(SHUT_RDWR))
        entries[key]!.closing = true
    }
}
