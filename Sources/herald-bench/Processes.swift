import Glibc

/// Starts a program (found on PATH); its stdout and stderr go to `logPath` or are inherited.
func spawn(_ arguments: [String], environment: [String: String] = [:], logPath: String? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let logPath {
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
    }
    var merged = currentEnvironment()
    for (key, value) in environment { merged[key] = value }
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    let status = posix_spawnp(&pid, arguments[0], &actions, nil, argv, envp)
    guard status == 0 else { throw BenchError("could not start \(arguments[0]): \(String(cString: strerror(status)))") }
    return pid
}

/// Runs a program to the end; throws unless it exits 0.
func run(_ arguments: [String], environment: [String: String] = [:], logPath: String? = nil) throws {
    let pid = try spawn(arguments, environment: environment, logPath: logPath)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    guard status == 0 else { throw BenchError("\(arguments.joined(separator: " ")) failed (status \(status))") }
}

/// Runs a program and returns its standard output.
func capture(_ arguments: [String], environment: [String: String] = [:]) throws -> String {
    let path = "/tmp/herald-bench-capture-\(getpid())"
    unlink(path)
    defer { unlink(path) }
    try run(arguments, environment: environment, logPath: path)
    return (try? readFile(path)) ?? ""
}

func readFile(_ path: String) throws -> String {
    guard let file = fopen(path, "r") else { throw BenchError("cannot read \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes += chunk[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}

func currentEnvironment() -> [String: String] {
    var environment: [String: String] = [:]
    var pointer = environ
    while let entry = pointer.pointee {
        let text = String(cString: entry)
        if let equals = text.firstIndex(of: "=") {
            environment[String(text[..<equals])] = String(text[text.index(after: equals)...])
        }
        pointer += 1
    }
    return environment
}

/// A kilobyte figure from /proc/<pid>/status (VmHWM, VmRSS), in bytes.
func processMemory(_ pid: pid_t, _ field: String) -> Int {
    guard let text = try? readFile("/proc/\(pid)/status") else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        let digits = line.filter(\.isNumber)
        return (Int(digits) ?? 0) * 1024
    }
    return 0
}

/// Resets a process's peak RSS (VmHWM) to its current RSS (Linux `clear_refs` 5).
func resetPeakMemory(_ pid: pid_t) {
    guard let file = fopen("/proc/\(pid)/clear_refs", "w") else { return }
    fputs("5", file)
    fclose(file)
}

/// A free TCP port on 127.0.0.1.
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    _ = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Prints a line at once (stdout is block-buffered when it is a file or a pipe).
func say(_ text: String = "") {
    let line = Array((text + "\n").utf8)
    line.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}
