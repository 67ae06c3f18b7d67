import Logging
import Metrics
import Spool

// Deprecated for one release: `Spool.LogConsumer` is the one consumer contract and
// `SyncWorker(consumer:…)` takes it. This file goes whole when they go.

/// What the sync worker needed from a consumer, before `Spool.LogConsumer` became the one
/// contract.
///
/// Conform to `LogConsumer` instead and pass it to `SyncWorker(consumer:…)`; the members map
/// one to one: `committedOffset` is `committed`, `nextBatch(maxCount:maxBytes:)` is
/// `read(maxCount:maxBytes:)` (returning a `ConsumerBatch`, whose `endSeq` is
/// ``SourceBatch/end``), `observeWrites(_:)` is `watchWrites(_:)`, `consumerName` is `name`.
///
/// Thread safety: all members may be called from any task; the worker calls at most one
/// of `read` and `commit` at a time.
@available(*, deprecated, message: "conform to Spool's LogConsumer and use SyncWorker(consumer:…); SyncSource goes in the next release")
public protocol SyncSource: Sendable {
    /// The log the records come from (the first half of every record id).
    var logID: LogID { get }
    /// The consumer's name (it names the dead-letter log and the metrics).
    var consumerName: String { get }
    /// The next record the consumer delivers.
    var committedOffset: UInt64 { get }
    /// Records written to the log and not yet committed. Cheap: no I/O.
    var pendingRecords: UInt64 { get }
    /// Reads up to `maxCount` records and about `maxBytes` payload bytes from the committed
    /// offset (at least one record if any is pending). Blocking I/O stays off the cooperative pool.
    func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch
    /// Moves the committed offset to `end` (the next record to deliver), atomically and durably.
    func commit(upTo end: UInt64) async throws
    /// Registers `handler`, called with the offset just past the last written record each time
    /// the log writes. It must be cheap and must not block. The worker cancels the returned
    /// registration when it stops.
    func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation
}

/// The answer of ``SyncSource/nextBatch(maxCount:maxBytes:)``: `ConsumerBatch` replaces it.
@available(*, deprecated, message: "use Spool's ConsumerBatch (end is its endSeq); SourceBatch goes with SyncSource in the next release")
public struct SourceBatch: Sendable {
    /// The records, in order.
    public var records: [Record]
    /// The offset that committing the whole batch moves the consumer to: past the last
    /// record and past any dropped, expired or corrupt range the read skipped. Equal to the
    /// committed offset when nothing is pending.
    public var end: UInt64

    /// A batch of `records` that commits the consumer to `end`.
    public init(records: [Record], end: UInt64) {
        self.records = records
        self.end = end
    }
}

/// A deprecated ``SyncSource`` as the worker's source.
@available(*, deprecated, message: "goes with SyncSource")
struct SyncSourceAdapter: WorkerSource {
    let source: any SyncSource

    var logID: LogID { source.logID }
    var consumerName: String { source.consumerName }
    var committed: UInt64 { source.committedOffset }
    var pendingRecords: UInt64 { source.pendingRecords }

    func read(maxCount: Int, maxBytes: Int) async throws -> ConsumerBatch {
        let start = source.committedOffset
        let batch = try await source.nextBatch(maxCount: maxCount, maxBytes: maxBytes)
        return ConsumerBatch(records: batch.records, endSeq: batch.end, startSeq: start)
    }

    func commit(upTo end: UInt64) async throws {
        try await source.commit(upTo: end)
    }

    func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        source.observeWrites(handler)
    }
}

extension SyncWorker {
    /// Makes a worker that drains a deprecated ``SyncSource`` into `sink`, as
    /// ``init(consumer:sink:configuration:deadLetters:clock:random:logger:metricsFactory:)``.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    @available(*, deprecated, message: "use init(consumer:sink:configuration:deadLetters:clock:…) with a Spool LogConsumer; SyncSource goes in the next release")
    public init(
        source: any SyncSource,
        sink: some SyncSink,
        configuration: SyncConfiguration = .init(),
        deadLetters: (any DeadLetterSink)?,
        clock: C,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        logger: Logger = Logger(label: "spool.sync"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(SyncError) {
        try self.init(
            reading: SyncSourceAdapter(source: source), sink: sink, configuration: configuration, deadLetters: deadLetters,
            clock: clock, random: random, logger: logger, metricsFactory: metricsFactory)
    }

    /// Makes a worker that drains a deprecated ``SyncSource`` through `uploader`, as
    /// ``init(consumer:uploader:configuration:deadLetters:clock:random:wallClock:logger:metricsFactory:)``.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    @available(*, deprecated, message: "use init(consumer:uploader:configuration:deadLetters:clock:…) with a Spool LogConsumer; SyncSource goes in the next release")
    public init(
        source: any SyncSource,
        uploader: any Uploader,
        configuration: SyncConfiguration = .init(),
        deadLetters: (any DeadLetterSink)?,
        clock: C,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        wallClock: @escaping @Sendable () -> Double = SyncWorker.systemWallClock,
        logger: Logger = Logger(label: "spool.sync"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(SyncError) {
        let sink = HTTPSink(uploader: uploader, logID: source.logID, configuration: configuration, wallClock: wallClock)
        try self.init(
            reading: SyncSourceAdapter(source: source), sink: sink, configuration: configuration, deadLetters: deadLetters,
            clock: clock, random: random, logger: logger, metricsFactory: metricsFactory)
    }
}
