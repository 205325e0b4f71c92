extension PostgresConnection {
    /// Runs `body` inside `BEGIN … COMMIT`; any error rolls back and is rethrown. The `BEGIN` is
    /// queued (`send`): it travels with the body's first statement.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        // Inside a transaction already: the body joins it (PostgreSQL has no nested transactions).
        if inTransaction { return try body(self) }
        inTransaction = true
        defer { inTransaction = false }
        try send("BEGIN")
        let value: T
        do {
            value = try body(self)
        } catch {
            discardQueued()
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
        do {
            try query("COMMIT")
        } catch {
            discardQueued()
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
        return value
    }
}
