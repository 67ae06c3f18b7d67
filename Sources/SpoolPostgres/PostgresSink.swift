import Logging
import PostgresNIO
import Spool
import SpoolSync
import Synchronization

/// A `SyncSink` that inserts records into a PostgreSQL table, each record exactly once.
///
/// Each request is one transaction: `BEGIN`, one `INSERT … SELECT FROM unnest(…)` of every
/// row (the arrays bound in binary) with `ON CONFLICT (id) DO NOTHING`, `COMMIT`; the request
/// is accepted only once `COMMIT` answered. A batch sent again after its answer was lost (a
/// dropped connection, a killed process) inserts nothing twice: its ids are there.
///
/// The table (see <doc:PostgreSQL>): `id text primary key` (`<log id>-<seq>`), `log_id text
/// not null`, `seq bigint not null`, `time timestamptz`, `data jsonb` (the record when
/// PostgreSQL's `jsonb` takes it as it is), `data_bytes bytea` (its exact bytes otherwise).
/// With ``Configuration/createTable`` the sink creates it when missing; an existing table
/// with other columns, types or primary key stops the worker with an error that says so.
///
/// `prepare` counts payload bytes against `maxBytes`. Requests may run at once, each on a
/// connection of its own, kept open between requests.
///
/// Thread safety: every member may be called from any task.
public struct PostgresSink: SyncSink {
    /// The most rows in one request, whatever `maxBytes` allows.
    public static let maxRowsPerRequest = 100_000

    /// Where the sink inserts.
    public let configuration: Configuration
    private let table: PostgresTable
    /// The log the sink inserts the records of, and whether it is a collector's: the worker
    /// unwraps its records with it.
    public let unwrapper: RecordUnwrapper?
    private let connections: PostgresConnections
    private let setup: TableSetup
    private let logger: Logger

    /// A sink that inserts the records of the log `logID` into the configured table.
    ///
    /// Opens no connection: the first request connects, creates the table when asked, and
    /// checks it.
    ///
    /// - Parameters:
    ///   - configuration: the server, credentials and table.
    ///   - logID: the log the records come from: with their seq, it makes their ids.
    ///   - origins: whether the log is a collector's, whose records are `OriginRecord`s: then
    ///     each row carries the device record's id, log id, seq, time and bytes (the worker
    ///     unwraps them once for every sink, by ``unwrapper``, into `OutgoingRecord`s; a record
    ///     that does not decode goes in under the collector log's id).
    ///   - logger: where the sink logs, at debug level, connection failures (never a payload
    ///     or a password).
    /// - Throws: `SyncError.Code.invalidConfiguration` when the configuration is invalid.
    public init(
        configuration: Configuration, logID: LogID, origins: Bool = false, logger: Logger = Logger(label: "spool.postgres")
    ) throws(SyncError) {
        try configuration.validate()
        guard let name = TableName(configuration.table) else { preconditionFailure("validated") }
        self.configuration = configuration
        self.table = PostgresTable(name: name, displayName: configuration.table)
        self.unwrapper = RecordUnwrapper(logID: logID, origins: origins)
        self.logger = logger
        self.setup = TableSetup()
        var connection = PostgresConnection.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, database: configuration.database, tls: try Self.tls(configuration.tls))
        connection.options.connectTimeout = .nanoseconds(Int64(configuration.connectTimeout.components.seconds) * 1_000_000_000
            + configuration.connectTimeout.components.attoseconds / 1_000_000_000)
        self.connections = PostgresConnections(configuration: connection)
    }

    /// The longest prefix of `records` within `maxBytes` of payload (at least one record) and
    /// ``maxRowsPerRequest`` rows. The payload counted is each record's as read from the
    /// drained log (`OutgoingRecord.stored`), as it was before the worker unwrapped records.
    public func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<PostgresBatch> {
        var count = 0
        var bytes = 0
        for record in records.prefix(Self.maxRowsPerRequest) {
            if count > 0 && bytes + record.stored.payload.count > maxBytes { break }
            bytes += record.stored.payload.count
            count += 1
        }
        return prepare(exactly: Array(records.prefix(count)))
    }

    /// The request for exactly `records`: one row of each, as the worker unwrapped it.
    public func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<PostgresBatch> {
        let request = PostgresBatch(rows: records.map(PostgresTableRow.init))
        return SinkRequest(body: request, count: records.count, bytes: records.reduce(0) { $0 + $1.stored.payload.count })
    }

    /// Inserts the request's rows in one transaction, answering `SinkOutcome.accepted`
    /// once `COMMIT` returned; see ``PostgresSink`` for how errors map to outcomes.
    public func send(_ request: PostgresBatch, timeout: Duration) async -> SinkOutcome {
        await withTaskGroup(of: SinkOutcome?.self) { group in
            group.addTask {
                let outcome = await self.attempt(request)
                // A value refused (class 22) in a lone record that went to `data`: `jsonb` did
                // not take it (a number beyond `numeric`), so it goes to `data_bytes`, as every
                // record `jsonb` does not take. Refused there too, it is dead-lettered.
                guard case .rejected = outcome, let row = request.loneJSONBRow else { return outcome }
                return await self.attempt(PostgresBatch(rows: [row], jsonb: false))
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            // Cancelled, the attempt closes its connection and ends at once.
            while await group.next() != nil {}
            return first ?? .retry(SyncError(.timeout, "PostgreSQL did not answer within \(timeout)"))
        }
    }

    /// Closes the sink's connections.
    public func shutdown() async {
        await connections.shutdown()
    }

    private var destination: String { configuration.redactedURL }

    /// One try: a connection, the table checked once, the transaction.
    private func attempt(_ request: PostgresBatch) async -> SinkOutcome {
        let connection: PostgresConnection
        do {
            connection = try await connections.take()
        } catch {
            let outcome = PostgresAnswer.outcome(of: error, table: configuration.table, destination: destination)
            logger.debug("PostgreSQL connection failed", metadata: ["destination": "\(destination)", "outcome": "\(outcome)"])
            return outcome
        }
        return await withTaskCancellationHandler {
            do {
                try await setup.run { [table, configuration, destination, logger] in
                    try await table.prepare(on: connection, create: configuration.createTable, destination: destination, logger: logger)
                }
                // The future-returning `query` reads every answer, so an error the server sends
                // after the statement started is thrown here, not left in an unread stream.
                _ = try await connection.query("BEGIN", logger: logger).get()
                _ = try await connection.query(PostgresQuery(unsafeSQL: table.insertStatement, binds: request.bindings), logger: logger).get()
                let commit = try await connection.query("COMMIT", logger: logger).get()
                guard commit.metadata.command == "COMMIT" else {
                    connections.discard(connection)
                    return .retry(SyncError(.serverError, "PostgreSQL rolled the transaction back at COMMIT"))
                }
                connections.giveBack(connection)
                return .accepted
            } catch let error as SyncError {
                connections.discard(connection)
                return .fatal(error)
            } catch {
                connections.discard(connection)
                let outcome = PostgresAnswer.outcome(of: error, table: configuration.table, destination: destination)
                logger.debug("PostgreSQL request failed", metadata: ["destination": "\(destination)", "outcome": "\(outcome)"])
                return outcome
            }
        } onCancel: {
            PostgresConnections.close(connection)
        }
    }

    private static func tls(_ mode: Configuration.TLSMode) throws(SyncError) -> PostgresConnection.Configuration.TLS {
        var tls = TLSConfiguration.makeClientConfiguration()
        if mode != .verifyFull { tls.certificateVerification = .none }
        let context: NIOSSLContext
        do {
            context = try NIOSSLContext(configuration: tls)
        } catch {
            throw SyncError(.invalidConfiguration, "TLS for PostgreSQL could not be set up", cause: error)
        }
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(context)
        case .require, .verifyFull: return .require(context)
        }
    }
}

/// The table's creation and check, done once before the first insert, by one request while
/// the others wait for it; done again by the next request when it failed.
final class TableSetup: Sendable {
    private let done = Mutex(false)
    private let gate = AsyncGate()

    func run(_ body: @Sendable () async throws -> Void) async throws {
        if done.withLock({ $0 }) { return }
        try await gate.withLock {
            if done.withLock({ $0 }) { return }
            try await body()
            done.withLock { $0 = true }
        }
    }
}

/// A lock held across suspension points, waiters served in order.
actor AsyncGate {
    private var isLocked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func withLock(_ body: @Sendable () async throws -> Void) async throws {
        if isLocked {
            await withCheckedContinuation { waiters.append($0) }
        } else {
            isLocked = true
        }
        defer {
            if waiters.isEmpty { isLocked = false } else { waiters.removeFirst().resume() }
        }
        try await body()
    }
}
