import Logging
import PostgresNIO
import SpoolSync

/// The sink's table: its statements, its creation, and the check that an existing table is
/// the one Spool writes.
struct PostgresTable: Sendable {
    let name: TableName
    /// The name as the user gave it, for messages.
    let displayName: String

    /// The columns and their types, as `format_type` spells them.
    static let columns: [(name: String, type: String)] = [
        ("id", "text"), ("log_id", "text"), ("seq", "bigint"), ("time", "timestamp with time zone"),
        ("data", "jsonb"), ("data_bytes", "bytea"),
    ]

    var createStatement: String {
        """
        CREATE TABLE IF NOT EXISTS \(name.quoted) (id text PRIMARY KEY, log_id text NOT NULL, \
        seq bigint NOT NULL, time timestamptz, data jsonb, data_bytes bytea)
        """
    }

    /// One statement inserts a whole request; a row already there (a batch sent again after
    /// an answer was lost) is skipped.
    var insertStatement: String {
        """
        INSERT INTO \(name.quoted) (id, log_id, seq, time, data, data_bytes) \
        SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::timestamptz[], $5::jsonb[], $6::bytea[]) \
        ON CONFLICT (id) DO NOTHING
        """
    }

    /// Creates the table if it is missing, one creator at a time.
    ///
    /// `CREATE TABLE IF NOT EXISTS` is not safe against itself: two sessions that both find the
    /// table missing both create it, and the second fails on a catalog index (SQLSTATE 23505,
    /// which the sink takes as fatal). Forwarders of a fleet that share a table, started
    /// together, do exactly that at their first batch. So the statement runs in a transaction
    /// holding an advisory lock keyed on the table's name: the second creator waits, then finds
    /// the table.
    func createIfMissing(on connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("BEGIN", logger: logger).get()
        _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(name.quoted)))", logger: logger).get()
        _ = try await connection.query(PostgresQuery(unsafeSQL: createStatement), logger: logger).get()
        _ = try await connection.query("COMMIT", logger: logger).get()
    }

    /// Creates the table when asked and it is missing, then checks it is Spool's.
    ///
    /// - Throws: `SyncError` (`SyncError.Code.destinationRefused`) when the table is
    ///   missing, or has other columns, types, or primary key; what the connection threw
    ///   otherwise (classified by the caller).
    func prepare(on connection: PostgresConnection, create: Bool, destination: String, logger: Logger) async throws {
        if create { try await createIfMissing(on: connection, logger: logger) }
        var found: [String: String] = [:]
        let columnRows = try await connection.query("""
            SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a
            WHERE a.attrelid = to_regclass(\(name.quoted)) AND a.attnum > 0 AND NOT a.attisdropped
            """, logger: logger)
        for try await (column, type) in columnRows.decode((String, String).self) { found[column] = type }
        guard !found.isEmpty else {
            throw SyncError(.destinationRefused, """
                PostgreSQL at \(destination) has no table \(displayName) (create it, or pass --create-table)
                """)
        }
        let expected = Dictionary(uniqueKeysWithValues: Self.columns.map { ($0.name, $0.type) })
        guard found == expected else {
            let have = found.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            throw SyncError(.destinationRefused, """
                table \(displayName) at \(destination) is not Spool's: it has (\(have)), and Spool writes \
                (\(Self.columns.map { "\($0.name) \($0.type)" }.joined(separator: ", "))) with id the primary key
                """)
        }
        var key: [String] = []
        let keyRows = try await connection.query("""
            SELECT a.attname::text FROM pg_index i
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
            WHERE i.indrelid = to_regclass(\(name.quoted)) AND i.indisprimary
            """, logger: logger)
        for try await column in keyRows.decode(String.self) { key.append(column) }
        guard key == ["id"] else {
            throw SyncError(.destinationRefused, """
                table \(displayName) at \(destination) is not Spool's: its primary key is \
                (\(key.joined(separator: ", "))), not (id)
                """)
        }
    }
}
