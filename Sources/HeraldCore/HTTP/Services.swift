import Postgres

/// The long-lived parts every handler may use.
public struct Services: Sendable {
    public let configuration: Configuration
    public let database: PostgresPool
    public let logger: Logger
    public let migrator: Migrator
    public let tenancy: TenancyStore

    public init(configuration: Configuration, database: PostgresPool, logger: Logger, migrator: Migrator) {
        self.configuration = configuration
        self.database = database
        self.logger = logger
        self.migrator = migrator
        self.tenancy = TenancyStore()
    }
}
