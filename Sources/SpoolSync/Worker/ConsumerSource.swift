import Logging
import Spool

/// What the worker reads from and commits to, with the worker's error handling folded in:
/// ``ConsumerSource`` (a Spool consumer), and, until the deprecated `SyncSource` goes, its
/// adapter. Internal: the public contract is `Spool.LogConsumer`.
///
/// Thread safety: all members may be called from any task; the worker calls at most one of
/// `read` and `commit` at a time.
protocol WorkerSource: Sendable {
    /// The log the records come from (the first half of every record id).
    var logID: LogID { get }
    /// What the worker's metrics and logs call it.
    var consumerName: String { get }
    /// The committed offset: the seq of the next record to deliver.
    var committed: UInt64 { get }
    /// Records written past the committed offset. Cheap: no I/O.
    var pendingRecords: UInt64 { get }
    /// The next batch from the committed offset, off the cooperative pool.
    func read(maxCount: Int, maxBytes: Int) async throws -> ConsumerBatch
    /// A durable commit up to `end` (exclusive), off the cooperative pool.
    func commit(upTo end: UInt64) async throws
    /// Calls `handler` with the seq past the last written record each time the log grows; never
    /// throws (a watch that cannot be set up is said and replaced by none).
    func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation
}

/// A Spool consumer as the worker's source, whichever process writes the log (`Consumer` in
/// this one, `DetachedConsumer` beside another, or an in-memory one in tests): reads and
/// commits run off the cooperative pool; commits are durable.
struct ConsumerSource: WorkerSource {
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
