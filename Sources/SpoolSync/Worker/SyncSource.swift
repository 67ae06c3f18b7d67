import Spool

/// What the sync worker needs from a consumer: the seam between the worker and the log.
///
/// `SyncWorker(consumer:…)` adapts any `Spool.LogConsumer` to it; tests use an in-memory
/// source. Reads start at the committed offset and return the same records again until they
/// are committed.
///
/// Thread safety: all members may be called from any task; the worker calls at most one
/// of `read` and `commit` at a time.
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

/// The answer of ``SyncSource/nextBatch(maxCount:maxBytes:)``.
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
