import HeraldDomain
import FoundationEssentials
import Glibc
import Secrets

/// One SQL file of `sql/`, named `NNNN_description.sql`.
package struct Migration: Sendable, Equatable {
    package let version: Int
    package let name: String
    package let sql: String
    /// SHA-256 of the file, recorded when applied, so a file edited afterwards is noticed.
    package var checksum: String { Secrets.hex(Secrets.sha256(sql)) }

    package init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Reads every `NNNN_*.sql` file in `directory`, ordered by version.
    package static func load(directory: String) throws -> [Migration] {
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
    package static func loadFunctions(directory: String) throws -> [Migration] {
        let folder = directory + "/functions"
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return [] }
        return try entries.filter { $0.hasSuffix(".sql") }.sorted().map { entry in
            guard let data = FileManager.default.contents(atPath: folder + "/" + entry) else {
                throw MigrationError(message: "cannot read functions/\(entry)")
            }
            return Migration(version: 0, name: "functions/" + String(entry.dropLast(4)), sql: String(decoding: data, as: UTF8.self))
        }
    }

    /// `citus/layout.sql` in `directory`, if there is one.
    package static func loadCitusLayout(directory: String) throws -> Migration? {
        let path = directory + "/citus/layout.sql"
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else { throw MigrationError(message: "cannot read citus/layout.sql") }
        return Migration(version: 0, name: "citus/layout", sql: String(decoding: data, as: UTF8.self))
    }

    /// The migrations folder: `configured` if given, else the first `sql/` holding migrations
    /// that `Resources` finds.
    package static func locateDirectory(configured: String?) -> String {
        if let configured { return configured }
        return Resources.locate("sql") { directory in
            guard let entries = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return false }
            return entries.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".sql") }
        }
    }
}

/// Migrations could not be read or applied.
package struct MigrationError: Error, Sendable, CustomStringConvertible {
    package let message: String
    package var description: String { message }
}
