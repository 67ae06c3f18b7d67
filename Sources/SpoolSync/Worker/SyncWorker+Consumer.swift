import Foundation
import Logging
import Metrics
import Spool

extension SyncWorker {
    /// Makes a worker that drains `consumer` into `sink`; it does nothing until ``start()`` or a
    /// flush. The clock, the dead-letter sink, the randomness and the metrics are the caller's
    /// (``init(consumer:sink:configuration:logger:)`` picks them for a Spool log).
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain: `Consumer`, `DetachedConsumer`, or your own
    ///     `LogConsumer` (an in-memory one in tests). Commits are durable.
    ///   - sink: the destination: ``HTTPSink``, `PubSubSink`, `PostgresSink` or your own.
    ///   - configuration: the policies; validated here. The concurrency is also bounded by the
    ///     sink's ``SyncSink/maxInFlight``.
    ///   - deadLetters: where refused records go. When `nil`, refused records are counted,
    ///     logged and skipped.
    ///   - clock: the clock of timers, backoffs, deadlines and request timeouts.
    ///   - random: uniform draws in `0 ..< 1` for the backoff's jitter.
    ///   - logger: where the worker logs (debug for each batch, info for refusals), never payloads.
    ///   - metricsFactory: where the `spool_sync_*` metrics go; the process-wide `MetricsSystem` when nil.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        consumer: any LogConsumer,
        sink: some SyncSink,
        configuration: SyncConfiguration = .init(),
        deadLetters: (any DeadLetterSink)?,
        clock: C,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        logger: Logger = Logger(label: "spool.sync"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(SyncError) {
        try self.init(
            reading: ConsumerSource(consumer: consumer, logger: logger), sink: sink, configuration: configuration,
            deadLetters: deadLetters, clock: clock, random: random, logger: logger, metricsFactory: metricsFactory)
    }

    /// Makes a worker that posts Spool's envelope of `consumer`'s records through `uploader`
    /// (an ``HTTPSink``); it does nothing until ``start()`` or a flush.
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain, as for
    ///     ``init(consumer:sink:configuration:deadLetters:clock:random:logger:metricsFactory:)``.
    ///   - uploader: the transport.
    ///   - configuration: the policies; validated here.
    ///   - deadLetters: where refused records go. When `nil`, refused records are counted,
    ///     logged and skipped.
    ///   - clock: the clock of timers, backoffs, deadlines and request timeouts.
    ///   - random: uniform draws in `0 ..< 1` for the backoff's jitter.
    ///   - wallClock: seconds since 1970, to read `Retry-After` dates.
    ///   - logger: where the worker logs (debug for each batch, info for refusals), never payloads.
    ///   - metricsFactory: where the `spool_sync_*` metrics go; the process-wide `MetricsSystem` when nil.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        consumer: any LogConsumer,
        uploader: any Uploader,
        configuration: SyncConfiguration = .init(),
        deadLetters: (any DeadLetterSink)?,
        clock: C,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        wallClock: @escaping @Sendable () -> Double = SyncWorker.systemWallClock,
        logger: Logger = Logger(label: "spool.sync"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(SyncError) {
        let sink = HTTPSink(uploader: uploader, logID: consumer.logID, configuration: configuration, wallClock: wallClock)
        try self.init(
            consumer: consumer, sink: sink, configuration: configuration, deadLetters: deadLetters, clock: clock,
            random: random, logger: logger, metricsFactory: metricsFactory)
    }
}

extension SyncWorker where C == ContinuousClock {
    /// A worker for a Spool consumer (`Consumer` of a log this process writes, or
    /// `DetachedConsumer` beside another process) on the system's continuous clock,
    /// delivering to `sink` and dead-lettering refused records into
    /// `<log directory>/deadletter/<consumer name>` (see ``DeadLetterLog``), a log with the
    /// consumer's configuration's encryption and file modes (the consumer's lock keeps any
    /// other committer of the name, and so any other writer of that log, away).
    ///
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - sink: the destination: ``HTTPSink``, `PubSubSink`, `PostgresSink` or your own.
    ///   - configuration: the policies; validated here.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        consumer: any LogConsumer, sink: some SyncSink, configuration: SyncConfiguration = .init(),
        logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        try self.init(consumer: consumer, label: nil, sink: sink, configuration: configuration, logger: logger)
    }

    /// As ``init(consumer:sink:configuration:logger:)``, with `label` naming the worker in its
    /// metrics and logs instead of the consumer's name (a group's `<writer>/<consumer>`).
    init(
        consumer: any LogConsumer, label: String?, sink: some SyncSink, configuration: SyncConfiguration, logger: Logger
    ) throws(SyncError) {
        let deadLetters = DeadLetterLog(logDirectory: consumer.directory, consumer: consumer.name, logID: consumer.logID,
                                        configuration: DeadLetterLog.configuration(from: consumer.configuration), logger: logger)
        try self.init(
            reading: ConsumerSource(consumer: consumer, logger: logger, label: label), sink: sink, configuration: configuration,
            deadLetters: deadLetters, clock: ContinuousClock(), random: { Double.random(in: 0..<1) }, logger: logger,
            metricsFactory: nil)
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
        consumer: any LogConsumer, uploader: any Uploader, configuration: SyncConfiguration = .init(),
        logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        let sink = HTTPSink(uploader: uploader, logID: consumer.logID, configuration: configuration)
        try self.init(consumer: consumer, sink: sink, configuration: configuration, logger: logger)
    }

    /// A worker for a Spool consumer posting to `url` with the platform's default uploader:
    /// ``HTTPClientUploader`` on Linux, ``URLSessionUploader`` on Apple platforms.
    /// - Parameters:
    ///   - consumer: the consumer to drain.
    ///   - url: the collector's URL.
    ///   - configuration: the policies; validated here.
    ///   - logger: where the worker logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(consumer: any LogConsumer, url: URL, configuration: SyncConfiguration = .init(), logger: Logger = Logger(label: "spool.sync")) throws(SyncError) {
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
