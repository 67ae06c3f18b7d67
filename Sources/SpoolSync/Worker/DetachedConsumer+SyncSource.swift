import Foundation
import Logging
import Spool

/// A sidecar's consumer as the worker's source: the worker reads, uploads and commits in
/// this process while another process appends to the log.
extension DetachedConsumer: SyncSource {
    /// The consumer's `name`.
    public var consumerName: String { name }
    /// The committed offset (`committed`): the seq of the next record to deliver.
    public var committedOffset: UInt64 { committed }

    /// `read(maxCount:maxBytes:)` on the consumer's own queue: its records (durable: the
    /// consumer syncs their segment files), and its `endSeq` as the batch's `end`.
    /// - Throws: what `read` throws (`SpoolError`).
    public func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        let batch = try await read(maxCount: maxCount, maxBytes: maxBytes)
        return SourceBatch(records: batch.records, end: batch.endSeq)
    }

    /// A durable commit through `end - 1` on the consumer's own queue; nothing when `end` is
    /// not past the committed offset.
    /// - Throws: what `commit(through:)` throws (`SpoolError`); the offset on disk is then the previous one.
    public func commit(upTo end: UInt64) async throws {
        guard end > 0, end > committed else { return }
        try await commit(through: end - 1)
    }

    /// Calls `handler` when the log grows, from a thread that watches the log's directory
    /// (`watchWrites(_:)`). If the watch cannot be set up, nothing is called: the
    /// worker's interval timer still ships what is written.
    public func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        (try? watchWrites(handler)) ?? WriteObservation {}
    }
}

extension SyncWorker where C == ContinuousClock {
    /// A worker for a sidecar's consumer on the system's continuous clock, dead-lettering
    /// refused records into `<log directory>/deadletter/<consumer name>` (a log this process
    /// writes: the consumer's lock keeps any other committer of the name away).
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - uploader: the transport.
    ///   - configuration: the policies; validated here.
    ///   - logConfiguration: the log's configuration as this process knows it (keys, file
    ///     modes), for the dead-letter log.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        detached consumer: DetachedConsumer, uploader: any Uploader, configuration: SyncConfiguration = .init(),
        logConfiguration: Spool.Configuration = .init(), logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        let sink = HTTPSink(uploader: uploader, logID: consumer.logID, configuration: configuration)
        try self.init(detached: consumer, sink: sink, configuration: configuration, logConfiguration: logConfiguration, logger: logger)
    }

    /// A worker for a sidecar's consumer delivering to `sink`, as
    /// ``init(detached:uploader:configuration:logConfiguration:logger:)``.
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - sink: the destination.
    ///   - configuration: the policies; validated here.
    ///   - logConfiguration: the log's configuration as this process knows it (keys, file
    ///     modes), for the dead-letter log.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        detached consumer: DetachedConsumer, sink: some SyncSink, configuration: SyncConfiguration = .init(),
        logConfiguration: Spool.Configuration = .init(), logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        let deadLetters = DeadLetterLog(logDirectory: consumer.directory, consumer: consumer.name, logID: consumer.logID,
                                        configuration: DeadLetterLog.configuration(from: logConfiguration), logger: logger)
        try self.init(
            source: consumer, sink: sink, configuration: configuration, deadLetters: deadLetters,
            clock: ContinuousClock(), logger: logger)
    }

    /// A worker for a sidecar's consumer posting to `url` with the platform's default
    /// uploader (``HTTPClientUploader`` on Linux, ``URLSessionUploader`` on Apple platforms).
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - url: the collector's URL.
    ///   - configuration: the policies; validated here.
    ///   - logConfiguration: the log's configuration as this process knows it, for the dead-letter log.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        detached consumer: DetachedConsumer, url: URL, configuration: SyncConfiguration = .init(),
        logConfiguration: Spool.Configuration = .init(), logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        try self.init(detached: consumer, uploader: platformUploader(url: url), configuration: configuration,
                      logConfiguration: logConfiguration, logger: logger)
    }
}
