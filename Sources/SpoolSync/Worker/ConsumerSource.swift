import Logging
import Spool

/// A Spool consumer as the worker's source, whichever process writes the log (`Consumer` in
/// this one, `DetachedConsumer` beside another): reads and commits run off the cooperative
/// pool; commits are durable.
struct ConsumerSource: SyncSource {
    let consumer: any LogConsumer
    /// Where a watch that cannot be set up is said.
    let logger: Logger
    /// What the worker's metrics and logs call it: the consumer's name, or, in a group,
    /// `<writer>/<consumer>`, so that each writer log has metrics of its own.
    var label: String? = nil

    var logID: LogID { consumer.logID }
    var consumerName: String { label ?? consumer.name }
    var committedOffset: UInt64 { consumer.committed }
    var pendingRecords: UInt64 { consumer.pendingRecords }

    /// The consumer's batch: its records, and its `endSeq` as the batch's `end`, so committing
    /// the batch also passes the ranges the read skipped (expired, dropped, corrupt).
    func nextBatch(maxCount: Int, maxBytes: Int) async throws -> SourceBatch {
        let batch = try await consumer.read(maxCount: maxCount, maxBytes: maxBytes)
        return SourceBatch(records: batch.records, end: batch.endSeq)
    }

    /// A durable commit up to `end`; nothing when `end` is the committed offset.
    func commit(upTo end: UInt64) async throws {
        try await consumer.commit(upTo: end, mode: .durable)
    }

    /// The consumer's `watchWrites(_:)`. If the watch cannot be set up, it is logged and
    /// nothing is called: the worker's interval timer still ships what is written.
    func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        do {
            return try consumer.watchWrites(handler)
        } catch {
            logger.warning("cannot watch the log for writes; uploads wait for the flush interval",
                           metadata: ["consumer": "\(consumer.name)", "error": "\(error)"])
            return WriteObservation {}
        }
    }
}
