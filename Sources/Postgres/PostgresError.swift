/// An error from PostgreSQL or from talking to it.
///
/// It carries what the server said (SQLSTATE, message, detail, constraint) and the SQL text that
/// failed, but never the parameter values, so it is safe to log.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; extensible like PostgresNIO's `PSQLError.Code`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name.
        public let rawValue: String
        /// A code by name (extensible).
        public init(_ rawValue: String) { self.rawValue = rawValue }
        /// The connection could not be made (server down or restarting).
        public static let connectionFailure = Code("connectionFailure")
        /// An open connection broke during a statement (the server restarted, failed over or
        /// ended the session): the connection is closed, and the same work on a fresh one may
        /// succeed at once.
        public static let connectionLost = Code("connectionLost")
        /// The server answered a statement with an error (see `sqlState`).
        public static let server = Code("server")
        /// No connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code("poolTimeout")
        /// The pool was closed (the service is shutting down).
        public static let poolClosed = Code("poolClosed")
        /// A value in a row could not be read as the type asked for.
        public static let decoding = Code("decoding")
        /// A parameter cannot be sent (it holds a NUL byte).
        public static let invalidParameter = Code("invalidParameter")
        /// The code's name.
        public var description: String { rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The five-character SQLSTATE, when the server sent one (`23505` unique violation, …).
    public var sqlState: String?
    /// The server's primary message, or libpq's.
    public var message: String
    /// The server's detail line, when it sent one.
    public var detail: String?
    /// The constraint a violation names, when the server sent it.
    public var constraint: String?
    /// The statement that failed; never its parameter values.
    public var sql: String?

    /// An error of a kind, with what the server or libpq said.
    public init(code: Code, sqlState: String? = nil, message: String, detail: String? = nil,
                constraint: String? = nil, sql: String? = nil) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.constraint = constraint
        self.sql = sql
    }

    /// True when the database is unreachable rather than the statement being wrong: callers map
    /// this to "service unavailable, retry later".
    public var isUnavailable: Bool {
        if code == .connectionFailure || code == .connectionLost || code == .poolClosed { return true }
        guard let state = sqlState else { return false }
        // Class 08: connection exception; 57P01-57P03: admin shutdown, crash shutdown, cannot
        // connect now; 25006: the server cannot write (a standby, or a primary being demoted).
        return state.hasPrefix("08") || state == SQLState.adminShutdown || state == SQLState.crashShutdown
            || state == SQLState.cannotConnectNow || state == SQLState.readOnlySQLTransaction
    }

    /// The SQLSTATEs Herald acts on (PostgreSQL's Appendix A), by name, so that no caller
    /// compares a bare code.
    public enum SQLState {
        public static let uniqueViolation = "23505"
        public static let foreignKeyViolation = "23503"
        public static let serializationFailure = "40001"
        public static let deadlockDetected = "40P01"
        public static let undefinedTable = "42P01"
        /// The connection reached a server that cannot write. The connection is replaced before
        /// its next use (`PostgresConnection.ensureAlive`).
        public static let readOnlySQLTransaction = "25006"
        public static let adminShutdown = "57P01"
        public static let crashShutdown = "57P02"
        public static let cannotConnectNow = "57P03"
    }

    /// True when running the same transaction again may succeed: a deadlock or a serialization
    /// failure.
    public var isTransient: Bool { sqlState == SQLState.deadlockDetected || sqlState == SQLState.serializationFailure }

    /// True for a unique-constraint violation.
    public var isUniqueViolation: Bool { sqlState == SQLState.uniqueViolation }

    /// Code, SQLSTATE and message, for the log; never parameter values.
    public var description: String {
        var parts = ["PostgresError(\(code)"]
        if let sqlState { parts.append("sqlState: \(sqlState)") }
        parts.append("message: \(message)")
        if let detail { parts.append("detail: \(detail)") }
        if let constraint { parts.append("constraint: \(constraint)") }
        if let sql { parts.append("sql: \(sql)") }
        return parts.joined(separator: ", ") + ")"
    }
}
