import CSQLite
import BenchScenarios

/// A thin wrapper over one SQLite connection in WAL mode with the `events` table.
/// Not thread-safe: one benchmark thread owns it.
final class Database {
    private var handle: OpaquePointer?
    let path: String

    /// Opens (creating if needed) the database at `path`, in WAL mode at `synchronous`
    /// (`FULL`, `NORMAL` or `OFF`), with the events table.
    init(path: String, synchronous: String) throws {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK else {
            defer { sqlite3_close(handle) }
            throw BenchError("sqlite3_open_v2 \(path): \(String(cString: sqlite3_errmsg(handle)))")
        }
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=\(synchronous)")
        try execute("CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY AUTOINCREMENT, json TEXT)")
    }

    func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(message)
            throw BenchError("\(sql): \(text) (\(path))")
        }
    }

    func prepare(_ sql: String) throws -> Statement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw BenchError("prepare \(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }
        return Statement(statement, database: self)
    }

    var lastError: String { String(cString: sqlite3_errmsg(handle)) }

    /// Closes the connection; the last connection's close checkpoints the WAL into the
    /// database file and removes it.
    func close() throws {
        guard sqlite3_close(handle) == SQLITE_OK else { throw BenchError("sqlite3_close \(path): \(lastError)") }
        handle = nil
    }
}

/// One prepared statement.
final class Statement {
    private let statement: OpaquePointer
    private unowned let database: Database

    init(_ statement: OpaquePointer, database: Database) {
        self.statement = statement
        self.database = database
    }

    /// Runs the statement with `text` bound (not copied) to its one parameter.
    func run(text: [UInt8]) throws {
        try text.withUnsafeBytes { raw in
            sqlite3_bind_text(statement, 1, raw.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(raw.count), nil)
            try step()
        }
    }

    /// Runs the statement with `int` bound to its one parameter.
    func run(int: Int64) throws {
        sqlite3_bind_int64(statement, 1, int)
        try step()
    }

    /// Runs a query, calling `body` on each row.
    func rows(_ body: (OpaquePointer) throws -> Void) throws {
        defer { sqlite3_reset(statement) }
        while true {
            let result = sqlite3_step(statement)
            if result == SQLITE_DONE { return }
            guard result == SQLITE_ROW else { throw BenchError("sqlite3_step: \(database.lastError)") }
            try body(statement)
        }
    }

    private func step() throws {
        defer { sqlite3_reset(statement) }
        guard sqlite3_step(statement) == SQLITE_DONE else { throw BenchError("sqlite3_step: \(database.lastError)") }
    }

    func finalize() { sqlite3_finalize(statement) }
}
