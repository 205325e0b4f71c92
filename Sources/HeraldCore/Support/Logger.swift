import FoundationEssentials
import Glibc
import HTTPServer
import Synchronization

/// Severity of a log line.
public enum LogLevel: String, Sendable, Comparable {
    case debug, info, warn, error

    private var rank: Int {
        switch self {
        case .debug: return 0
        case .info: return 1
        case .warn: return 2
        case .error: return 3
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
}

/// Writes one JSON object per line to standard output (SPEC §10). Never give it a secret.
public struct Logger: Sendable {
    public let level: LogLevel
    private let sink: @Sendable (String) -> Void

    /// A logger that writes to standard output.
    public init(level: LogLevel) {
        self.level = level
        self.sink = { line in Logger.writeToStandardOutput(line) }
    }

    /// A logger that hands each line to `sink` (tests).
    public init(level: LogLevel, sink: @escaping @Sendable (String) -> Void) {
        self.level = level
        self.sink = sink
    }

    public func debug(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.info, message, fields) }
    public func warn(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.warn, message, fields) }
    public func error(_ message: String, _ fields: [String: JSONValue] = [:]) { log(.error, message, fields) }

    public func log(_ level: LogLevel, _ message: String, _ fields: [String: JSONValue]) {
        guard level >= self.level else { return }
        var object = fields
        object["ts"] = .int(Int(currentTimeMilliseconds()))
        object["level"] = .string(level.rawValue)
        object["msg"] = .string(message)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(object) else { return }
        sink(String(decoding: data, as: UTF8.self))
    }

    private static let outputLock = Mutex(())

    private static func writeToStandardOutput(_ line: String) {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        outputLock.withLock { _ in
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
}

/// Wall-clock time in epoch milliseconds.
public func currentTimeMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}

/// Monotonic time in nanoseconds, for durations.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
