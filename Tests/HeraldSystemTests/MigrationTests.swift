import Foundation
import HeraldCore
import Postgres
import Synchronization
@testable import HeraldTestSupport
import Testing

@Suite("Migrations", .enabled(if: TestEnvironment.hasDatabase, TestEnvironment.skipped))
struct MigrationTests {
    /// A fresh, empty database in the test cluster, dropped afterwards.
    func withFreshDatabase(_ body: (String) throws -> Void) throws {
        let environment = try TestEnvironment.shared()
        let base = try #require(environment.server.service.services.configuration.databaseURL)
        let name = "mig_\(UUID().uuidString.prefix(8).lowercased())"
        let admin = try environment.connection()
        try admin.queryOnce("CREATE DATABASE \(name)")
        defer { _ = try? admin.queryOnce("DROP DATABASE \(name) WITH (FORCE)") }
        let url = base.replacingOccurrences(of: "/herald?", with: "/\(name)?")
        #expect(url != base)
        try body(url)
    }

    func migrations() throws -> [Migration] {
        try Migration.load(directory: repositoryRoot + "/sql")
    }

    @Test("the sql folder is found beside the binary and ordered by version")
    func load() throws {
        let all = try migrations()
        #expect(all.first?.version == 1)
        #expect(all.map(\.version) == all.map(\.version).sorted())
        #expect(Migration.locateDirectory(configured: nil).hasSuffix("/sql"))
    }

    @Test("running twice applies each migration once")
    func twice() throws {
        try withFreshDatabase { url in
            let migrator = Migrator(migrations: try migrations())
            let connection = try PostgresConnection(connectionString: url)
            #expect(try migrator.appliedVersion(connection) == 0)
            #expect(try migrator.migrate(connection).count == migrator.migrations.count)
            #expect(try migrator.migrate(connection).isEmpty)
            #expect(try migrator.appliedVersion(connection) == migrator.latestVersion)
            let recorded = try connection.query("SELECT count(*) FROM schema_migrations")
            #expect(try recorded[0].decode(0, as: Int.self) == migrator.migrations.count)
        }
    }

    @Test("four instances migrating at once: each migration applied exactly once, all succeed")
    func concurrent() throws {
        try withFreshDatabase { url in
            let migrator = Migrator(migrations: try migrations())
            let applied = Mutex<[Int]>([])
            let failures = Mutex<[String]>([])
            let group = DispatchGroup()
            for _ in 0..<4 {
                group.enter()
                Thread.detachNewThread {
                    defer { group.leave() }
                    do {
                        let connection = try PostgresConnection(connectionString: url)
                        let done = try migrator.migrate(connection)
                        applied.withLock { $0 += done.map(\.version) }
                    } catch {
                        failures.withLock { $0.append(String(describing: error)) }
                    }
                }
            }
            group.wait()
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(applied.withLock { $0 }.sorted() == migrator.migrations.map(\.version))
        }
    }

    @Test("a migration file edited after it was applied is refused")
    func checksum() throws {
        try withFreshDatabase { url in
            let original = try migrations()
            let connection = try PostgresConnection(connectionString: url)
            try Migrator(migrations: original).migrate(connection)
            var edited = original
            edited[0] = Migration(version: original[0].version, name: original[0].name, sql: original[0].sql + "\n-- edited")
            #expect(throws: MigrationError.self) { try Migrator(migrations: edited).migrate(connection) }
        }
    }

    @Test("a failing migration leaves no trace and no record")
    func failingMigration() throws {
        try withFreshDatabase { url in
            let broken = try migrations() + [Migration(version: 9999, name: "9999_broken",
                                                        sql: "CREATE TABLE half_done (x int); SELECT no_such_function();")]
            let connection = try PostgresConnection(connectionString: url)
            #expect(throws: PostgresError.self) { try Migrator(migrations: broken).migrate(connection) }
            let table = try connection.query("SELECT to_regclass('half_done') IS NULL")
            #expect(try table[0].decode(0, as: Bool.self))
            let recorded = try connection.query("SELECT count(*) FROM schema_migrations WHERE version = 9999")
            #expect(try recorded[0].decode(0, as: Int.self) == 0)
        }
    }
}
