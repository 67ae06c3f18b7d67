import Spool

/// A Spool consumer is the worker's source: reads and commits run on the consumer's own
/// queue (off the cooperative pool); commits are durable.
extension Consumer: SyncSource {
    /// The id of the log the consumer reads (`log.id`).
    public var logID: LogID { log.id }
    /// The consumer's `name`.
    public var consumerName: String { name }
    /// The committed offset (`committed`): the seq of the next record to deliver.
    public var committedOffset: UInt64 { committed }
    /// The records appended at or after the committed offset (`lag.records`); no file I/O.
    public var pendingRecords: UInt64 { lag.records }

    /// `read(maxCount:maxBytes:)` on the consumer's own queue, off the cooperative pool: its
    /// records, and its `endSeq` as the batch's `end`, so committing the batch also passes the
    /// ranges the read skipped (expired, dropped, corrupt).
    /// - Throws: what `read` throws (`SpoolError`).
    public func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        let batch = try await read(maxCount: maxCount, maxBytes: maxBytes)
        return SourceBatch(records: batch.records, end: batch.endSeq)
    }

    /// A durable commit through `end - 1` (`commit(through:mode:)` with `.durable`, on the
    /// consumer's own queue); nothing when `end` is not past the committed offset.
    /// - Throws: what `commit` throws (`SpoolError`); the offset on disk is then the previous one.
    public func commit(upTo end: UInt64) async throws {
        guard end > 0, end > committed else { return }
        try await commit(through: end - 1, mode: .durable)
    }

    /// The log's `observeWrites(_:)`: `handler` is called after each write with the seq just
    /// past the last written record, on the thread that wrote it.
    public func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        log.observeWrites(handler)
    }
}
