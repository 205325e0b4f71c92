extension PostgresConnection {
    /// Runs `body` inside `BEGIN … COMMIT`; any error rolls back and is rethrown.
    public func withTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try query("BEGIN")
        let value: T
        do {
            value = try body(self)
        } catch {
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
        do {
            try query("COMMIT")
        } catch {
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
        return value
    }
}
