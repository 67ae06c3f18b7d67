import Foundation
import Logging
import Spool

extension SyncWorker where C == ContinuousClock {
    /// A worker for a Spool consumer on the system's continuous clock, delivering to `sink`
    /// and dead-lettering refused records into `<log directory>/deadletter/<consumer name>`
    /// (see ``DeadLetterLog``), a log with the consumer's log's encryption and file modes.
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - sink: the destination.
    ///   - configuration: the policies; validated here.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        consumer: Consumer, sink: some SyncSink, configuration: SyncConfiguration = .init(),
        logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        let deadLetters = DeadLetterLog(logDirectory: consumer.log.directory, consumer: consumer.name, logID: consumer.log.id,
                                        configuration: DeadLetterLog.configuration(from: consumer.log.configuration), logger: logger)
        try self.init(
            source: consumer, sink: sink, configuration: configuration, deadLetters: deadLetters,
            clock: ContinuousClock(), logger: logger)
    }

    /// A worker for a Spool consumer posting Spool's envelope through `uploader` (an
    /// ``HTTPSink``), as ``init(consumer:sink:configuration:logger:)``.
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - uploader: the transport, such as ``URLSessionUploader``.
    ///   - configuration: the policies; validated here.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        consumer: Consumer, uploader: any Uploader, configuration: SyncConfiguration = .init(),
        logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        let sink = HTTPSink(uploader: uploader, logID: consumer.log.id, configuration: configuration)
        try self.init(consumer: consumer, sink: sink, configuration: configuration, logger: logger)
    }

    /// A worker for a Spool consumer posting to `url` with the platform's default uploader:
    /// ``HTTPClientUploader`` on Linux, ``URLSessionUploader`` on Apple platforms.
    public init(consumer: Consumer, url: URL, configuration: SyncConfiguration = .init(), logger: Logger = Logger(label: "spool.sync")) throws(SyncError) {
        try self.init(consumer: consumer, uploader: platformUploader(url: url), configuration: configuration, logger: logger)
    }
}

/// The platform's default uploader posting to `url`: ``HTTPClientUploader`` on Linux,
/// ``URLSessionUploader`` on Apple platforms.
public func platformUploader(url: URL) -> any Uploader {
    #if os(Linux)  // as HTTPClientUploader.swift
    HTTPClientUploader(url: url)
    #else
    URLSessionUploader(url: url)
    #endif
}
