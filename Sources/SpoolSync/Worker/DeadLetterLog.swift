import Dispatch
import Logging
import Spool
import Synchronization

/// The default ``DeadLetterSink``: a Spool log of its own at
/// `<log directory>/deadletter/<consumer name>`, readable with `spool dump` (with the source
/// log's `--key-file` when it is encrypted).
///
/// Each refused record becomes one record holding
/// `{"id":"<log id>-<seq>","seq":<seq>,"time":<ms>,"status":<HTTP status>,"data":<the record>}`
/// (the record embedded as in the JSON encoding: `"data_base64":"<base64>"` in place of `data`
/// when it is not valid UTF-8, so every byte of it is kept),
/// appended at `synced` durability before the worker commits past it. The log is opened on
/// first use (so a consumer that never meets a poison record gets no directory) off the
/// cooperative pool, and closed by ``shutdown()``. A `deadletter/` or `deadletter/<consumer>` that
/// is a symbolic link is refused (`SpoolError` `.io`), never followed.
///
/// Thread safety: `Sendable`; stores are serialised by the worker.
public final class DeadLetterLog: DeadLetterSink {
    /// The dead-letter log's directory.
    public let directory: String
    private let logDirectory: String
    private let consumer: String
    private let sourceLog: LogID
    private let configuration: Configuration
    private let logger: Logger
    private let opened = Mutex<EventLog?>(nil)

    /// The dead-letter log of `consumer` of the log in `logDirectory` (opened on first use).
    ///
    /// - Parameters:
    ///   - logDirectory: the directory of the log the consumer reads.
    ///   - consumer: the consumer's name.
    ///   - logID: the id of that log (records keep their original ids).
    ///   - configuration: what the dead-letter log is opened with: ``configuration(from:)`` of
    ///     the source log's, so refused records are kept as private as the log they came from
    ///     (its encryption, file and directory modes). No default: a default without the
    ///     source's keys would store an encrypted log's refused records in the clear.
    ///   - logger: where the dead-letter log logs (what it stores, never payloads).
    public init(logDirectory: String, consumer: String, logID: LogID, configuration: Configuration,
                logger: Logger = Logger(label: "spool.sync")) {
        self.directory = Self.directory(logDirectory: logDirectory, consumer: consumer)
        self.logDirectory = logDirectory
        self.consumer = consumer
        self.sourceLog = logID
        self.configuration = configuration
        self.logger = logger
    }

    /// The dead-letter log's configuration for a log opened with `source`:
    /// - the same keys. Refused records are never stored in the clear when the source has
    ///   keys: a source opened with keys for reading only (no current key, as `spool sync
    ///   --key-file` does) gives the dead-letter log its highest key id as the current one;
    /// - the same cap (`maxBytes` and `segmentSize`), with `Configuration.CapPolicy.dropOldest`:
    ///   a server that refuses everything cannot make refused records take more disk than
    ///   their log may, and the oldest are dropped (and counted) first. Refusing new ones
    ///   instead would stop the sync at the first poison record after the cap;
    /// - the same file and directory modes;
    /// - room for any record the source took, in its envelope (base64 at worst): a
    ///   `maxRecordSize` of 4/3 the source's plus 1 KiB, at most 64 MiB;
    /// - everything else the library's defaults (no dictionary: one trained from refused
    ///   records would store pieces of them unencrypted).
    public static func configuration(from source: Configuration) -> Configuration {
        var configuration = Configuration()
        if var encryption = source.encryption {
            if encryption.current == nil { encryption.current = encryption.keys.keys.max() }
            configuration.encryption = encryption
        }
        configuration.maxBytes = source.maxBytes
        configuration.segmentSize = source.segmentSize
        configuration.capPolicy = .dropOldest
        // A refused record is stored in its envelope: its bytes as base64 at worst (4 for 3)
        // and the envelope's own fields. A record the source log took must fit (up to the
        // 64 MiB ceiling of any record).
        configuration.maxRecordSize = min(64 * 1024 * 1024, (source.maxRecordSize + 2) / 3 * 4 + 1024)
        configuration.maxPendingBytes = max(configuration.maxPendingBytes, 2 * configuration.maxRecordSize)
        configuration.fileMode = source.fileMode
        configuration.directoryMode = source.directoryMode
        return configuration
    }

    /// `<log directory>/deadletter/<consumer name>`.
    public static func directory(logDirectory: String, consumer: String) -> String {
        let base = logDirectory.hasSuffix("/") ? String(logDirectory.dropLast()) : logDirectory
        return "\(base)/\(EventLog.deadLetterDirectory)/\(consumer)"
    }

    /// Appends each record's envelope (see ``DeadLetterLog``) at `synced` durability, opening
    /// the dead-letter log first if needed; when it returns, every record is durable in it.
    /// - Parameters:
    ///   - records: the refused records, in seq order, as read from the log.
    ///   - error: the refusal; only its HTTP status is stored (0 when there was none).
    /// - Throws: `SpoolError` if the log cannot be opened or a record cannot be stored; the
    ///   records appended before the failure stay.
    public func store(_ records: [Record], refusedWith error: SyncError) async throws {
        let log = try await open()
        let encoder = BatchEncoder(logID: sourceLog, encoding: .json)
        for record in records {
            var envelope: [UInt8] = []
            encoder.appendEnvelope(record, to: &envelope, oneLine: false, status: error.status ?? 0)
            try await log.append(envelope, durability: .synced)
        }
    }

    /// Closes the dead-letter log if it was opened (off the cooperative pool). A later
    /// ``store(_:refusedWith:)`` opens it again.
    public func shutdown() async {
        let log = opened.withLock { log -> EventLog? in
            defer { log = nil }
            return log
        }
        guard let log else { return }
        do {
            try await offPool { try log.close() }
        } catch {
            logger.error("closing the dead-letter log failed", metadata: ["spool.directory": "\(directory)", "spool.error": "\(error)"])
        }
    }

    private func open() async throws -> EventLog {
        if let log = opened.withLock({ $0 }) { return log }
        let (logDirectory, consumer, configuration, logger) = (logDirectory, consumer, configuration, logger)
        let log = try await offPool {
            // Neither `deadletter/` nor `deadletter/<consumer>` may be a link (SpoolError .io).
            let directory = try EventLog.createDirectories([EventLog.deadLetterDirectory, consumer], inside: logDirectory, permissions: configuration.directoryMode)
            return try EventLog.open(directory: directory, configuration: configuration, logger: logger)
        }
        opened.withLock { $0 = log }
        return log
    }
}

/// Runs blocking file I/O on a Dispatch thread, off the cooperative pool.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
