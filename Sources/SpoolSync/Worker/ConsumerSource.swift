import Logging
import Spool

/// What the worker reads from and commits to: a Spool consumer, whichever process writes the
/// log (`Consumer` in this one, `DetachedConsumer` beside another, or an in-memory one in
/// tests), with the worker's error handling folded in. Reads and commits run off the
/// cooperative pool; commits are durable.
///
/// Thread safety: all members may be called from any task; the worker calls at most one of
/// `read` and `commit` at a time.
struct ConsumerSource: Sendable {
    let consumer: any LogConsumer
    /// Where a watch that cannot be set up is said.
    let logger: Logger
    /// What the worker's metrics and logs call it: the consumer's name, or, in a group,
    /// `<writer>/<consumer>`, so that each writer log has metrics of its own.
    var label: String? = nil

    var logID: LogID { consumer.logID }
    var consumerName: String { label ?? consumer.name }
    var committed: UInt64 { consumer.committed }
    var pendingRecords: UInt64 { consumer.pendingRecords }

    /// The consumer's batch; committing up to its `endSeq` also passes the ranges the read
    /// skipped (expired, dropped, corrupt).
    func read(maxCount: Int, maxBytes: Int) async throws -> ConsumerBatch {
        try await consumer.read(maxCount: maxCount, maxBytes: maxBytes)
    }

    /// A durable commit up to `end`; nothing when `end` is the committed offset.
    func commit(upTo end: UInt64) async throws {
        try await consumer.commit(upTo: end, mode: .durable)
    }

    /// The consumer's `watchWrites(_:)`. If the watch cannot be set up, it is logged and
    /// nothing is called: the worker's interval timer still ships what is written.
    func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        do {
            return try consumer.watchWrites(handler)
        } catch {
            logger.warning("cannot watch the log for writes; uploads wait for the flush interval",
                           metadata: ["consumer": "\(consumer.name)", "error": "\(error)"])
            return WriteObservation {}
        }
    }
}
