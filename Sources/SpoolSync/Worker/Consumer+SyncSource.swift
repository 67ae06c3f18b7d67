import Spool

/// A Spool consumer is the worker's source: reads and commits run on the consumer's own
/// queue (off the cooperative pool); commits are durable.
extension Consumer: SyncSource {
    public var logID: LogID { log.id }
    public var consumerName: String { name }
    public var committedOffset: UInt64 { committed }
    public var pendingRecords: UInt64 { lag.records }

    public func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        let batch = try await read(maxCount: maxCount, maxBytes: maxBytes)
        return SourceBatch(records: batch.records, end: batch.endSeq)
    }

    public func commit(upTo end: UInt64) async throws {
        guard end > 0, end > committed else { return }
        try await commit(through: end - 1, mode: .durable)
    }

    public func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        log.observeWrites(handler)
    }
}
