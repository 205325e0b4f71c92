import HeraldDomain
import HeraldStore
import FoundationEssentials

/// The operator console (SPEC §16): the files of `console/` (plain HTML, CSS and JavaScript
/// modules, no build step), found at start-up the way `sql/` is (`HERALD_CONSOLE_DIR` names
/// another folder), read once and served from memory.
package struct ConsoleFiles: Sendable {
    package struct File: Sendable {
        package let contentType: String
        package let bytes: [UInt8]
    }

    /// By file name (`index.html`, `console.js`, …).
    package let files: [String: File]

    package static let contentTypes = [
        "html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml", "png": "image/png", "json": "application/json",
    ]
    package static let maxFileBytes = 2 * 1024 * 1024

    package static func load(configured: String?) throws -> ConsoleFiles {
        let directory = configured ?? Resources.locate("console") { FileManager.default.isReadableFile(atPath: $0 + "/index.html") }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory),
              names.contains("index.html") else {
            throw ConfigurationError(variable: "HERALD_CONSOLE_DIR", message: "no console/index.html in \(directory)")
        }
        var files: [String: File] = [:]
        for name in names.sorted() where isServable(name) {
            guard let type = contentTypes[String(name.split(separator: ".").last ?? "")],
                  let data = FileManager.default.contents(atPath: directory + "/" + name), data.count <= maxFileBytes else { continue }
            files[name] = File(contentType: type, bytes: Array(data))
        }
        return ConsoleFiles(files: files)
    }

    /// A plain file name of a served type: no path, no hidden file.
    package static func isServable(_ name: String) -> Bool {
        !name.hasPrefix(".") && !name.contains("/") && name.contains(".") && contentTypes[String(name.split(separator: ".").last!)] != nil
    }
}
