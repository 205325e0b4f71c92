import CLibPQ
import Glibc

/// One libpq connection.
///
/// Blocking: call it from a thread that may block (an HTTP worker thread or the CLI), never from
/// Swift's cooperative pool. A connection is used by one thread at a time; the pool hands it out
/// exclusively.
///
/// `@unchecked Sendable`: the `PGconn` handle is only touched by the thread that currently holds
/// the connection, and the pool's lock orders the hand-over between threads.
public final class PostgresConnection: @unchecked Sendable {
    private var handle: OpaquePointer?
    private let connectionString: String
    private let applicationName: String
    private var preparedNames: [String: String] = [:]
    /// False behind a pooler in transaction mode (PgBouncer before 1.21): a statement prepared on
    /// one server connection is not there on the next, so `query` sends each statement unnamed.
    private let prepareStatements: Bool
    /// Whether statements are prepared once per connection (false behind a pooler in
    /// transaction mode: each is sent unnamed and planned at every run).
    public var preparesStatements: Bool { prepareStatements }
    /// Set when the server answered that it cannot write (`25006`: a standby, or a primary that
    /// was demoted): the next `ensureAlive` connects again, and libpq's
    /// `target_session_attrs=read-write` then finds the primary.
    private var mustReconnect = false
    private let overrides: [(keyword: String, value: String)]
    /// Settings made for the session at each (re)connection (`SET name TO 'value'`).
    private let settings: [(name: String, value: String)]
    /// Statements queued by `send`, not sent yet: they go with the next statement whose rows are
    /// read, in one round trip.
    private var queued: [(sql: String, parameters: [any PostgresEncodable])] = []
    /// Round trips to the server so far (a pipeline is one; preparing a statement outside one is
    /// one more): what ingest's rounds count (`herald_ingest_round_trips_total`).
    public private(set) var roundTrips = 0
    /// Inside `withTransaction`'s body: only there does `send` queue.
    public internal(set) var inTransaction = false

    /// Opens a connection. `connectionString` is a libpq URL (`postgresql://…`) or a conninfo
    /// string (`host=… dbname=…`); `overrides` are libpq keywords that replace its values (the
    /// host and port of another node of a Citus cluster, reached as the coordinator is).
    /// `settings` are made for the session each time it connects.
    public init(connectionString: String, applicationName: String = "herald", prepareStatements: Bool = true,
                overrides: [(keyword: String, value: String)] = [], settings: [(name: String, value: String)] = []) throws {
        self.connectionString = connectionString
        self.applicationName = applicationName
        self.prepareStatements = prepareStatements
        self.overrides = overrides
        for setting in settings where setting.name.isEmpty || !setting.name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ".") }) {
            throw PostgresError(code: .connectionFailure, message: "not a setting's name: \(setting.name)")
        }
        self.settings = settings
        try connect()
    }

    deinit {
        if let handle { PQfinish(handle) }
    }

    /// Whether libpq believes the connection is usable.
    public var isConnected: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Closes the connection; a later statement reconnects.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        preparedNames.removeAll()
        queued.removeAll()
    }

    /// (Re)connects. Defaults that the connection string does not set: a 5 s connect timeout, the
    /// application name, UTF-8.
    public func connect() throws {
        close()
        mustReconnect = false
        // Keywords before `dbname` are defaults: the expanded connection string overrides them,
        // and the overrides after it override the string.
        let keywords = ["connect_timeout", "application_name", "client_encoding", "dbname"] + overrides.map(\.keyword)
        let values = ["5", applicationName, "UTF8", connectionString] + overrides.map(\.value)
        let newHandle = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let newHandle else {
            throw PostgresError(code: .connectionFailure, message: "out of memory creating a connection")
        }
        guard PQstatus(newHandle) == CONNECTION_OK else {
            let message = Self.trimmed(PQerrorMessage(newHandle)) ?? "connection failed"
            PQfinish(newHandle)
            throw PostgresError(code: .connectionFailure, message: message)
        }
        // Notices ("relation already exists, skipping") would go to stderr; drop them.
        PQsetNoticeProcessor(newHandle, { _, _ in }, nil)
        handle = newHandle
        // SET, not set_config(): a utility statement is not planned, so nothing of the session
        // runs before the settings do (with `jit` and a low `jit_above_cost`, the setting's own
        // SELECT was compiled). A session whose settings failed is not kept.
        do {
            for setting in settings {
                try execute(unsafeSQL: "SET \(setting.name) TO '\(setting.value.replacing("'", with: "''"))'")
            }
        } catch {
            close()
            throw error
        }
    }

    /// Makes sure the connection is alive before it is handed out. A session the server ended
    /// while the connection sat idle (restart, failover, `pg_terminate_backend`,
    /// `idle_session_timeout`) has the server's last words waiting on its socket: a FATAL error,
    /// then the end of the stream. libpq reads the error as a mere notice and still says
    /// `CONNECTION_OK` (the end of the stream would only be seen by a later read), so anything
    /// waiting other than notifications means the session is gone, and the connection is
    /// replaced. Costs one `poll` with no wait.
    public func ensureAlive() throws {
        if mustReconnect {
            try connect()
            return
        }
        guard let handle, PQstatus(handle) == CONNECTION_OK else {
            try connect()
            return
        }
        let socket = PQsocket(handle)
        guard socket >= 0 else {
            try connect()
            return
        }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return }
        guard PQconsumeInput(handle) != 0, PQstatus(handle) == CONNECTION_OK else {
            try connect()
            return
        }
        // Parses what came; notifications that arrived while idle are dropped.
        var notified = false
        while let notify = PQnotifies(handle) {
            notified = true
            PQfreemem(notify)
        }
        if !notified || PQstatus(handle) != CONNECTION_OK { try connect() }
    }

    /// Waits at most `timeout` seconds for notifications on the channels this connection
    /// LISTENs to, and returns those that came (none when the time ran out). Throws when the
    /// connection is lost; a listener then connects again and LISTENs anew.
    public func notifications(timeout: Double) throws -> [PostgresNotification] {
        let handle = try liveHandle(sql: "LISTEN")
        var received = Self.drainNotifications(handle)
        guard received.isEmpty else { return received }
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw connectionError(sql: "LISTEN") }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(max(0, min(timeout, 60)) * 1000))
        if ready > 0 {
            guard PQconsumeInput(handle) != 0, PQstatus(handle) == CONNECTION_OK else { throw connectionError(sql: "LISTEN") }
            received = Self.drainNotifications(handle)
        }
        return received
    }

    private static func drainNotifications(_ handle: OpaquePointer) -> [PostgresNotification] {
        var received: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            received.append(PostgresNotification(channel: String(cString: notify.pointee.relname),
                                                 payload: String(cString: notify.pointee.extra)))
            PQfreemem(notify)
        }
        return received
    }

    /// Runs one statement as a prepared statement (prepared once per connection, then reused),
    /// and returns its rows. Its interpolated values are its parameters (see `SQL`). Statements
    /// queued by `send` go first, in the same round trip.
    @discardableResult
    public func query(_ statement: SQL) throws -> PostgresRows {
        guard queued.isEmpty else { return try pipeline([statement])[0] }
        return try query(statement.text, statement.parameters)
    }

    /// Queues a statement whose rows nobody reads (an insert, an update, a lock, a function that
    /// returns nothing): it is sent with the next statement that is awaited (`query`,
    /// `pipeline`, the transaction's `COMMIT`), all in one round trip (libpq's pipeline mode), and
    /// runs before it, in order. An error it meets is thrown by that call, and the statements
    /// after it in the round trip do not run. It queues only inside `withTransaction` (which
    /// queues its `BEGIN`), where a later error rolls everything back anyway and a rollback drops
    /// what is still queued; outside one it runs the statement at once.
    public func send(_ statement: SQL) throws {
        guard inTransaction else {
            try query(statement)
            return
        }
        queued.append((statement.text, statement.parameters))
    }

    /// Drops the statements `send` queued and did not send (the transaction is rolled back).
    public func discardQueued() {
        queued.removeAll()
    }

    /// Runs the queued statements, then `statements`, in one round trip (libpq's pipeline mode:
    /// every statement is sent, then one sync, then the results are read in order), and returns
    /// the rows of each of `statements`. The first error is thrown once every result is read;
    /// statements after a failed one do not run. With no statements it sends nothing: the queue
    /// waits for a statement that is read.
    public func pipeline(_ statements: [SQL]) throws -> [PostgresRows] {
        guard !statements.isEmpty else { return [] }
        return try run(statements)
    }

    /// Sends what is queued (before a statement that cannot go in a pipeline).
    private func flush() throws {
        if !queued.isEmpty { _ = try run([]) }
    }

    private func run(_ statements: [SQL]) throws -> [PostgresRows] {
        let items = queued + statements.map { ($0.text, $0.parameters) }
        guard !items.isEmpty else { return [] }
        // Every parameter checked before anything is sent or dropped from the queue: a refusal
        // halfway through the sending would leave the connection in pipeline mode with no sync,
        // and one after the queue was emptied would lose its statements (its BEGIN too).
        let texts = try items.map { try Self.texts(of: $0.parameters, sql: $0.sql) }
        queued.removeAll()
        let results = try runPipeline(zip(items, texts).map { ($0.0.sql, $0.1) })
        return Array(results.suffix(statements.count))
    }

    /// Runs one statement without preparing it: for statements run once.
    @discardableResult
    public func queryOnce(_ statement: SQL) throws -> PostgresRows {
        try queryOnce(statement.text, statement.parameters)
    }

    private func query(_ sql: String, _ parameters: [any PostgresEncodable]) throws -> PostgresRows {
        let handle = try liveHandle(sql: sql)
        guard prepareStatements else { return try queryOnce(sql, parameters) }
        let name: String
        if let existing = preparedNames[sql] {
            name = existing
        } else {
            name = "s\(preparedNames.count + 1)"
            roundTrips += 1
            let prepared = PQprepare(handle, name, sql, 0, nil)
            try check(prepared, sql: sql)
            preparedNames[sql] = name
        }
        let result = try withParameters(parameters, sql: sql) { count, values in
            roundTrips += 1
            return PQexecPrepared(handle, name, count, values, nil, nil, 0)
        }
        return try check(result, sql: sql)
    }

    private func queryOnce(_ sql: String, _ parameters: [any PostgresEncodable]) throws -> PostgresRows {
        try flush()
        let handle = try liveHandle(sql: sql)
        let result = try withParameters(parameters, sql: sql) { count, values in
            roundTrips += 1
            return PQexecParams(handle, sql, count, nil, values, nil, nil, 0)
        }
        return try check(result, sql: sql)
    }

    /// Runs SQL text that may hold several statements and no parameters (migration files).
    /// Named unsafe: never build this text from input.
    public func execute(unsafeSQL sql: String) throws {
        try flush()
        let handle = try liveHandle(sql: sql)
        roundTrips += 1
        try check(PQexec(handle, sql), sql: String(sql.prefix(200)))
    }

    // MARK: - Internals

    /// One round trip for `items`: each sent (prepared first when it is new to this connection),
    /// one sync, then every result read in order.
    private func runPipeline(_ items: [(sql: String, texts: [String?])]) throws -> [PostgresRows] {
        let handle = try liveHandle(sql: items[0].sql)
        guard PQenterPipelineMode(handle) == 1 else { throw connectionError(sql: items[0].sql) }
        // What each result answers: a statement, or the preparation of a new name.
        enum Answer { case statement(String), prepared(sql: String, name: String) }
        var answers: [Answer] = []
        var naming: [String: String] = [:]
        for (sql, parameters) in items {
            let sent: Int32
            if prepareStatements {
                let name: String
                if let existing = preparedNames[sql] ?? naming[sql] {
                    name = existing
                } else {
                    name = "s\(preparedNames.count + naming.count + 1)"
                    guard PQsendPrepare(handle, name, sql, 0, nil) == 1 else { throw connectionError(sql: sql) }
                    naming[sql] = name
                    answers.append(.prepared(sql: sql, name: name))
                }
                sent = withTexts(parameters) { count, values in
                    PQsendQueryPrepared(handle, name, count, values, nil, nil, 0)
                }
            } else {
                sent = withTexts(parameters) { count, values in
                    PQsendQueryParams(handle, sql, count, nil, values, nil, nil, 0)
                }
            }
            guard sent == 1 else { throw connectionError(sql: sql) }
            answers.append(.statement(sql))
        }
        guard PQpipelineSync(handle) == 1 else { throw connectionError(sql: items[0].sql) }
        roundTrips += 1
        var rows: [PostgresRows] = []
        var firstError: (any Error)?
        for answer in answers {
            let sql: String
            switch answer {
            case .statement(let text): sql = text
            case .prepared(let text, _): sql = text
            }
            guard let result = PQgetResult(handle) else { throw connectionError(sql: sql) }
            var answered: PostgresRows?
            if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
                PQclear(result)
            } else {
                do {
                    answered = try check(result, sql: sql)
                } catch let error as PostgresError where error.code == .connectionLost {
                    throw error   // the handle is gone
                } catch {
                    if firstError == nil { firstError = error }
                }
            }
            // each statement's results end with a null
            while let extra = PQgetResult(handle) { PQclear(extra) }
            switch answer {
            case .statement: rows.append(answered ?? PostgresRows(columns: [], rows: [], affectedRows: 0))
            case .prepared(let text, let name): if answered != nil { preparedNames[text] = name }
            }
        }
        guard let sync = PQgetResult(handle) else { throw connectionError(sql: items[0].sql) }
        let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
        PQclear(sync)
        guard synced, PQexitPipelineMode(handle) == 1 else { throw connectionError(sql: items[0].sql) }
        if let firstError { throw firstError }
        return rows
    }

    private func liveHandle(sql: String) throws -> OpaquePointer {
        if let handle, PQstatus(handle) == CONNECTION_OK { return handle }
        try connect()
        guard let handle else {
            throw PostgresError(code: .connectionFailure, message: "not connected", sql: sql)
        }
        return handle
    }

    /// Passes the parameters as C strings. A value with a NUL byte cannot be one (PostgreSQL
    /// text never holds NUL), so it is refused rather than silently cut short.
    private func withParameters<R>(_ parameters: [any PostgresEncodable], sql: String,
                                   _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R) throws -> R {
        try withTexts(Self.texts(of: parameters, sql: sql), body)
    }

    /// The parameters' texts; throws for a value with a NUL byte.
    private static func texts(of parameters: [any PostgresEncodable], sql: String) throws -> [String?] {
        let texts = parameters.map { $0.postgresText }
        for (index, text) in texts.enumerated() where text?.utf8.contains(0) == true {
            throw PostgresError(code: .invalidParameter, message: "parameter $\(index + 1) contains a NUL byte", sql: sql)
        }
        return texts
    }

    private func withTexts<R>(_ texts: [String?], _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = texts.map { text in text.flatMap { strdup($0) } }
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: max(buffer.count, 1)) {
                body(Int32(texts.count), texts.isEmpty ? nil : UnsafePointer($0))
            }
        }
    }

    /// Turns a result into rows or an error, and frees it.
    @discardableResult
    private func check(_ result: OpaquePointer?, sql: String) throws -> PostgresRows {
        guard let result else {
            throw connectionError(sql: sql)
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE:
            let rowCount = Int(PQntuples(result))
            let columnCount = Int(PQnfields(result))
            var columns = [String]()
            columns.reserveCapacity(columnCount)
            for column in 0..<columnCount {
                columns.append(String(cString: PQfname(result, Int32(column))))
            }
            var rows = [[String?]]()
            rows.reserveCapacity(rowCount)
            for row in 0..<rowCount {
                var values = [String?]()
                values.reserveCapacity(columnCount)
                for column in 0..<columnCount {
                    if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                        values.append(nil)
                    } else {
                        values.append(String(cString: PQgetvalue(result, Int32(row), Int32(column))))
                    }
                }
                rows.append(values)
            }
            return PostgresRows(columns: columns, rows: rows, affectedRows: rowCount)
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            let affected = Int(String(cString: PQcmdTuples(result))) ?? 0
            return PostgresRows(columns: [], rows: [], affectedRows: affected)
        default:
            let field = { (code: UInt8) -> String? in
                guard let value = PQresultErrorField(result, Int32(code)) else { return nil }
                return String(cString: value)
            }
            let sqlState = field(UInt8(ascii: "C"))
            let message = field(UInt8(ascii: "M")) ?? Self.trimmed(PQresultErrorMessage(result)) ?? "statement failed"
            // An error the server sent always has a SQLSTATE; one without is libpq's own, and
            // the only such error a statement meets is a lost connection ("server closed the
            // connection unexpectedly"), even while PQstatus still says CONNECTION_OK.
            if sqlState == nil || (handle.map { PQstatus($0) != CONNECTION_OK } ?? true) {
                close()
                throw PostgresError(code: .connectionLost, sqlState: sqlState, message: message, sql: sql)
            }
            if sqlState == PostgresError.SQLState.readOnlySQLTransaction { mustReconnect = true }
            throw PostgresError(code: .server, sqlState: sqlState, message: message,
                                detail: field(UInt8(ascii: "D")), constraint: field(UInt8(ascii: "n")), sql: sql)
        }
    }

    private func connectionError(sql: String) -> PostgresError {
        let message = handle.flatMap { Self.trimmed(PQerrorMessage($0)) } ?? "connection lost"
        close()
        return PostgresError(code: .connectionLost, message: message, sql: sql)
    }

    private static func trimmed(_ text: UnsafePointer<CChar>?) -> String? {
        guard let text else { return nil }
        let value = String(cString: text).trimmingCharacters(in: " \n\t")
        return value.isEmpty ? nil : value
    }
}

private extension String {
    func trimmingCharacters(in set: String) -> String {
        let characters = Set(set)
        var slice = Substring(self)
        while let first = slice.first, characters.contains(first) { slice.removeFirst() }
        while let last = slice.last, characters.contains(last) { slice.removeLast() }
        return String(slice)
    }
}

/// Calls `body` with a C array of C strings that lives for the call.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return pointers.withUnsafeMutableBufferPointer { buffer in
        buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) {
            body(UnsafePointer($0))
        }
    }
}

/// A NOTIFY received on a LISTENing connection.
public struct PostgresNotification: Sendable, Equatable {
    public let channel: String
    public let payload: String

    public init(channel: String, payload: String) {
        self.channel = channel
        self.payload = payload
    }
}
