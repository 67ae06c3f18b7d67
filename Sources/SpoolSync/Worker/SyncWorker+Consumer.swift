import Foundation
import Logging
import Spool

extension SyncWorker where C == ContinuousClock {
    /// A worker for a Spool consumer on the system's continuous clock, dead-lettering refused
    /// records into `<log directory>/deadletter/<consumer name>` (see ``DeadLetterLog``), a log
    /// with the consumer's log's encryption and file modes.
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
        let deadLetters = DeadLetterLog(logDirectory: consumer.log.directory, consumer: consumer.name, logID: consumer.log.id,
                                        configuration: DeadLetterLog.configuration(from: consumer.log.configuration), logger: logger)
        try self.init(
            source: consumer, uploader: uploader, configuration: configuration, deadLetters: deadLetters,
            clock: ContinuousClock(), logger: logger)
    }

    /// A worker for a Spool consumer posting to `url` with the platform's default uploader:
    /// ``HTTPClientUploader`` on Linux, ``URLSessionUploader`` on Apple platforms.
    public init(consumer: Consumer, url: URL, configuration: SyncConfiguration = .init(), logger: Logger = Logger(label: "spool.sync")) throws(SyncError) {
        #if os(Linux)  // as HTTPClientUploader.swift
        let uploader: any Uploader = HTTPClientUploader(url: url)
        #else
        let uploader: any Uploader = URLSessionUploader(url: url)
        #endif
        try self.init(consumer: consumer, uploader: uploader, configuration: configuration, logger: logger)
    }
}
