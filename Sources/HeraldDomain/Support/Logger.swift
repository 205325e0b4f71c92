import Dispatch
import FoundationEssentials
import Glibc
import Locking
import Synchronization
import JSON

/// Severity of a log line.
package enum LogLevel: String, Sendable, Comparable {
    case debug, info, warn, error

    private var rank: Int {
        switch self {
        case .debug: return 0
        case .info: return 1
        case .warn: return 2
        case .error: return 3
        }
    }

    package static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// Writes one JSON object per line to standard output (SPEC §10). Never give it a secret.
package struct Logger: Sendable {
    package let level: LogLevel
    private let sink: @Sendable (String) -> Void

    /// A logger that writes to standard output.
    package init(level: LogLevel) {
        self.level = level
        self.sink = { line in Logger.writeToStandardOutput(line) }
    }

    /// A logger that hands each line to `sink` (tests).
    package init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
    }

    package func debug(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.debug, message, fields) }
    package func info(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.info, message, fields) }
    package func warn(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.warn, message, fields) }
    package func error(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.error, message, fields) }

    package func log(_ level: LogLevel, _ message: String, _ fields: [String: JSONValue]) {
        guard level >= self.level else { return }
        var object = fields
        object["ts"] = .int(Int(currentTimeMilliseconds()))
        object["level"] = .string(level.rawValue)
        object["msg"] = .string(message)
        // The hand-written writer, not JSONEncoder: a line per request made the encoder the
        // largest cost of a small request (make bench, L1).
        sink(JSONValue.object(object).jsonText)
    }

    /// Lines wait here for the writer thread, which writes what has gathered in one `write`
    /// every few milliseconds: a `write` per line under a lock was the largest cost of a small
    /// request at 16 threads (make bench, L1).
    private static let pending = Lock<[UInt8]>([])
    private static let writerStarted = Atomic<Bool>(false)
    private static let wakeWriter = DispatchSemaphore(value: 0)
    /// Past this many bytes waiting, a caller writes them itself (back-pressure, bounded memory).
    private static let highWater = 1 << 20

    private static func writeToStandardOutput(_ line: String) {
        if !writerStarted.exchange(true, ordering: .acquiringAndReleasing) { startWriter() }
        let full = pending.withLock { buffer -> Bool in
            buffer.append(contentsOf: line.utf8)
            buffer.append(UInt8(ascii: "\n"))
            return buffer.count >= highWater
        }
        if full { flush() }
    }

    private static func startWriter() {
        let thread = DispatchQueue(label: "herald.log-writer", qos: .utility)
        thread.async {
            while true {
                _ = wakeWriter.wait(timeout: .now() + .milliseconds(5))
                flush()
            }
        }
    }

    /// Writes every line logged so far (at shutdown, before the process exits).
    package static func flush() {
        outputLock.withLock { _ in
            let bytes = pending.withLock { buffer -> [UInt8] in
                defer { buffer.removeAll(keepingCapacity: true) }
                return buffer
            }
            writeAll(bytes)
        }
    }

    /// Keeps flushes in order.
    private static let outputLock = Lock(())

    private static func writeAll(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 {
                    if written < 0 && errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}

/// Wall-clock time in epoch milliseconds.
package func currentTimeMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}

/// Monotonic time in nanoseconds, for durations.
package func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
