import Foundation
import Glibc

/// A child process started with posix_spawn, its stdout and stderr on one pipe.
///
/// Foundation's `Process.waitUntilExit` was seen to hang here when children daemonise
/// (`pg_ctl start`), so the tests use `waitpid` directly.
final class Subprocess: Sendable {
    let pid: pid_t
    /// The read end of the child's stdout+stderr.
    let output: Int32
    private static let spawning = NSLock()

    init(_ arguments: [String], environment: [String: String]? = nil) throws {
        // One spawn at a time, its pipe close-on-exec: a child another thread spawned meanwhile
        // inherited this pipe's write end (two private clusters started at once each held the
        // other's open through their server, and both tests waited for an end of output that
        // never came).
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw TestSetupError(message: "pipe failed") }
        _ = fcntl(pipeEnds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeEnds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        posix_spawn_file_actions_addclose(&actions, pipeEnds[1])

        let environment = environment ?? ProcessInfo.processInfo.environment
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let status = posix_spawnp(&child, arguments[0], &actions, nil, argv, envp)
        close(pipeEnds[1])
        guard status == 0 else {
            close(pipeEnds[0])
            throw TestSetupError(message: "cannot start \(arguments[0]): \(status)")
        }
        pid = child
        output = pipeEnds[0]
    }

    /// Reads the output until the child and its descendants close it.
    func readAll() -> String {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(output, &buffer, buffer.count)
            if count > 0 { data += buffer[0..<count] } else if count < 0 && errno == EINTR { continue } else { break }
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// Waits for the child; returns its exit status, or 128+signal when a signal ended it.
    func wait() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        close(output)
        if status & 0x7f == 0 { return (status >> 8) & 0xff }
        return 128 + (status & 0x7f)
    }

    /// Whether the child is still running (does not reap it).
    var isRunning: Bool {
        var info = siginfo_t()
        return waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info._sifields._kill.si_pid == 0
    }
}

/// Reads a pipe line by line on a background thread.
final class LineReader: Sendable {
    private let lines = LogRecorder()

    init(_ fd: Int32) {
        let lines = self.lines
        Thread.detachNewThread {
            var buffer = Data()
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(fd, &chunk, chunk.count)
                if count <= 0 { return }
                buffer.append(contentsOf: chunk[0..<count])
                while let newline = buffer.firstIndex(of: 10) {
                    let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                    buffer.removeSubrange(buffer.startIndex...newline)
                    lines.append(line)
                }
            }
        }
    }

    /// Every line read so far.
    var all: [String] { lines.all }

    func firstLine(containing text: String, seconds: Double) -> String? {
        var found: String?
        _ = eventually(seconds: seconds) {
            found = lines.all.first { $0.contains(text) }
            return found != nil
        }
        return found
    }
}
