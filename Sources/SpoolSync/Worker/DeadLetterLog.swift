import Foundation
import Logging
import Spool
import Synchronization

/// The default ``DeadLetterSink``: a Spool log of its own at
/// `<log directory>/deadletter/<consumer name>`, readable with `spool dump` (with the source
/// log's `--key-file` when it is encrypted).
///
/// Each refused record becomes one record of the dead-letter log: an `OriginRecord`
/// (FORMAT.md §11) holding the source log's id, the record's seq and time there, and its
/// exact bytes, never re-encoded, so any record the source log took fits. (Stored as a JSON
/// string, a record of control characters grew six-fold, past the record limit, and blocked
/// its consumer for good.) A collector's log (marked `ORIGINS`) already holds origin records:
/// its refused record is stored as it is, keeping the device's identity. A new dead-letter
/// log is marked `ORIGINS` itself, so `spool sync` of it sends the refused records again
/// under their own ids. A dead-letter log written before this layout holds JSON envelopes,
/// which start with `{`; it gets no marker, and its new records are origin records, which
/// start with their version byte, 1. The refusal (the HTTP status and the reason) is logged
/// by the worker, not stored.
///
/// Records are appended at `synced` durability before the worker commits past them. The log
/// is opened on first use (so a consumer that never meets a poison record gets no
/// directory) off the cooperative pool, and closed by ``shutdown()``. A `deadletter/` or
/// `deadletter/<consumer>` that is a symbolic link is refused (`SpoolError` `.io`), never
/// followed.
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
    /// The dead-letter log once opened, whether the source log holds origin records, and the
    /// source log's epochs (a record keeps the id its epoch gives it, FORMAT.md §13).
    private typealias Opened = (log: EventLog, sourceHoldsOrigins: Bool, epochs: LogEpochs)
    private let opened = Mutex<Opened?>(nil)

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
    /// - room for any record the source took, with the origin record's header: a
    ///   `maxRecordSize` of the source's plus 1 KiB, at most 64 MiB (the ceiling of any record;
    ///   only a source record within 38 bytes of it does not fit: its dead-letter write fails,
    ///   `deadLetterFailed`, and nothing is committed past it);
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
        // A refused record is stored as its exact bytes after a 38-byte header.
        configuration.maxRecordSize = min(64 * 1024 * 1024, source.maxRecordSize + 1024)
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

    /// Appends each record as an origin record (see ``DeadLetterLog``) at `synced` durability,
    /// opening the dead-letter log first if needed; when it returns, every record is durable in it.
    /// - Parameters:
    ///   - records: the refused records, in seq order, as read from the log.
    ///   - error: the refusal; not stored (the worker logs it).
    /// - Throws: `SpoolError` if the log cannot be opened or a record cannot be stored; the
    ///   records appended before the failure stay.
    public func store(_ records: [Record], refusedWith error: SyncError) async throws {
        let (log, sourceHoldsOrigins, epochs) = try await open()
        for record in records {
            try await log.append(Self.entry(record, logID: epochs.id(forSeq: record.seq), sourceHoldsOrigins: sourceHoldsOrigins), durability: .synced)
        }
    }

    /// Records durably that `consumer` skipped `ranges` of records the log could not read: a
    /// line each in `deadletter/<consumer>.damaged`, beside the dead-letter log (FORMAT.md,
    /// "Dead letters"), synced before it returns. The file is made with the log's file mode,
    /// and `deadletter/` with its directory mode; neither is followed if it is a link.
    /// - Throws: `SpoolError` `.io` naming the path when it cannot be written or synced.
    public func recordDamage(_ ranges: [DamagedRange], consumer: String) async throws {
        let (logDirectory, name, configuration) = (logDirectory, self.consumer, configuration)
        let time = Date()
        try await offload {
            let directory = try EventLog.createDirectories([EventLog.deadLetterDirectory], inside: logDirectory, permissions: configuration.directoryMode)
            try DamageFile(path: "\(directory)/\(DamageFile.name(consumer: name))", permissions: configuration.fileMode)
                .append(ranges, consumer: consumer, at: time)
        }
    }

    /// The dead-letter log's record for `record` of log `logID`: the record as it is when the
    /// source holds origin records and it reads as one (a collector's record keeps its
    /// device's identity), else an origin record of `logID`, the record's seq, time and exact bytes.
    static func entry(_ record: Record, logID: LogID, sourceHoldsOrigins: Bool) -> [UInt8] {
        if sourceHoldsOrigins, (try? OriginRecord.decode(record.payload)) != nil { return record.payload }
        return OriginRecord(log: logID, seq: record.seq, time: record.timestamp, payload: record.payload).encoded()
    }

    /// Closes the dead-letter log if it was opened (off the cooperative pool). A later
    /// ``store(_:refusedWith:)`` opens it again.
    public func shutdown() async {
        let log = opened.withLock { opened -> EventLog? in
            defer { opened = nil }
            return opened?.log
        }
        guard let log else { return }
        do {
            try await offload { try log.close() }
        } catch {
            logger.error("closing the dead-letter log failed", metadata: ["spool.directory": "\(directory)", "spool.error": "\(error)"])
        }
    }

    /// The dead-letter log, opened (and marked `ORIGINS` when new) on first use, and whether
    /// the source log holds origin records.
    private func open() async throws -> Opened {
        if let opened = opened.withLock({ $0 }) { return opened }
        let (logDirectory, consumer, configuration, logger, sourceLog) = (logDirectory, consumer, configuration, logger, sourceLog)
        let fresh: Opened = try await offload {
            let epochs = try LogEpochs.load(directory: logDirectory, base: sourceLog)
            // Neither `deadletter/` nor `deadletter/<consumer>` may be a link (SpoolError .io).
            let directory = try EventLog.createDirectories([EventLog.deadLetterDirectory, consumer], inside: logDirectory, permissions: configuration.directoryMode)
            let log = try EventLog.open(directory: directory, configuration: configuration, logger: logger)
            do {
                // An earlier version's log of JSON envelopes stays unmarked.
                if log.nextSeq == 0 { try OriginRecord.markStoresOrigins(log) }
            } catch {
                try? log.close()
                throw error
            }
            return (log: log, sourceHoldsOrigins: OriginRecord.storesOrigins(at: logDirectory), epochs: epochs)
        }
        opened.withLock { $0 = fresh }
        return fresh
    }
}
