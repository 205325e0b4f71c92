import HeraldDomain
import FoundationEssentials
import Glibc

/// Files Herald reads at start-up (`sql/`, `openapi/`), found beside the running binary: an
/// install's `<prefix>/share/herald/<name>` (the binary in `<prefix>/bin`), the source tree's
/// `<name>` above `.build/`, else the current directory's.
package enum Resources {
    /// The first candidate path for `name` that `accept` takes, else `./name`.
    package static func locate(_ name: String, accept: (String) -> Bool) -> String {
        var candidates: [String] = []
        var directory = executableDirectory()
        for _ in 0..<6 {
            candidates.append(directory + "/share/herald/" + name)
            candidates.append(directory + "/" + name)
            directory = parentDirectory(directory)
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/" + name)
        return candidates.first(where: accept) ?? name
    }

    private static func executableDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return FileManager.default.currentDirectoryPath }
        let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return parentDirectory(path)
    }

    private static func parentDirectory(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
