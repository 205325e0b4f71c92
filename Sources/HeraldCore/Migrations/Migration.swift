import FoundationEssentials
import Glibc
import Secrets

/// One SQL file of `sql/`, named `NNNN_description.sql`.
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String
    /// SHA-256 of the file, recorded when applied, so a file edited afterwards is noticed.
    public var checksum: String { Secrets.hex(Secrets.sha256(sql)) }

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Reads every `NNNN_*.sql` file in `directory`, ordered by version.
    public static func load(directory: String) throws -> [Migration] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
            throw MigrationError(message: "cannot read the migrations folder \(directory)")
        }
        var migrations: [Migration] = []
        for entry in entries where entry.hasSuffix(".sql") {
            let digits = entry.prefix { $0.isNumber }
            guard let version = Int(digits), entry.dropFirst(digits.count).hasPrefix("_") else {
                throw MigrationError(message: "migration file \(entry) is not named NNNN_description.sql")
            }
            guard let data = FileManager.default.contents(atPath: directory + "/" + entry) else {
                throw MigrationError(message: "cannot read \(entry)")
            }
            migrations.append(Migration(version: version, name: String(entry.dropLast(4)),
                                        sql: String(decoding: data, as: UTF8.self)))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw MigrationError(message: "two migrations have version \(a.version): \(a.name), \(b.name)")
        }
        guard !migrations.isEmpty else { throw MigrationError(message: "no migrations in \(directory)") }
        return migrations
    }

    /// The files of `functions/` in `directory`, in name order: SQL functions (`CREATE OR REPLACE`)
    /// that hold derived-state rules, applied again at every start after the migrations, so that a
    /// rule changes by editing its file rather than through a new migration. None: an empty list.
    public static func loadFunctions(directory: String) throws -> [Migration] {
        let folder = directory + "/functions"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        return try entries.filter { $0.hasSuffix(".sql") }.sorted().map { entry in
            guard let data = FileManager.default.contents(atPath: folder + "/" + entry) else {
                throw MigrationError(message: "cannot read functions/\(entry)")
            }
            return Migration(version: 0, name: "functions/" + String(entry.dropLast(4)), sql: String(decoding: data, as: UTF8.self))
        }
    }

    /// The migrations folder: `configured` if given, else the first `sql/` holding migrations
    /// found beside the running binary (an install's `share/herald/sql`, or the source tree's
    /// `sql/` above `.build/`), else `./sql`.
    public static func locateDirectory(configured: String?) -> String {
        if let configured { return configured }
        var candidates: [String] = []
        var directory = executableDirectory()
        for _ in 0..<6 {
            candidates.append(directory + "/share/herald/sql")
            candidates.append(directory + "/sql")
            directory = parentDirectory(directory)
        }
        candidates.append(FileManager.default.currentDirectoryPath + "/sql")
        return candidates.first { hasMigrations($0) } ?? "sql"
    }

    private static func hasMigrations(_ directory: String) -> Bool {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return false }
        return entries.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".sql") }
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

/// Migrations could not be read or applied.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
