import Dispatch

/// A consumer of a log: a named reader whose offset is committed atomically on disk, in the
/// process that writes the log (``Consumer``) or beside it (``DetachedConsumer``).
///
/// `read` returns the next batch from the committed offset; reading again without a commit
/// returns the same records. `commit(_:mode:)` (or `commit(upTo:mode:)`, an exclusive end)
/// advances the offset atomically; retention then deletes the sealed segments every consumer
/// has passed. Both kinds hand out only durable records, so nothing a consumer delivered can
/// vanish in a power loss and have its seq handed out again.
///
/// The sync worker (`SyncWorker(consumer:…)`) and the command line take any consumer.
/// Spool's two types are the conformers for files; an in-memory conformer (a test double)
/// keeps the same contract: reads from the committed offset, an exclusive `endSeq`, commits
/// checked as below.
///
/// Thread-safety: every member may be called from any thread; reads and commits are
/// serialised. The blocking methods do file I/O (not for the cooperative pool); the `async`
/// ones run it on a Dispatch thread.
public protocol LogConsumer: AnyObject, Sendable {
    /// The consumer's name.
    var name: String { get }
    /// The id of the log it reads (the first half of every event id).
    var logID: LogID { get }
    /// The log's directory.
    var directory: String { get }
    /// The ids the log's records are sent under (``LogEpochs``), as they were when the
    /// consumer was opened. A conformer of its own may leave it to the default: the log's
    /// id for every record.
    var epochs: LogEpochs { get }
    /// The log's configuration as this consumer knows it: its keys, expiry rules and file modes.
    var configuration: Configuration { get }
    /// The committed offset: the seq of the next record to deliver.
    var committed: UInt64 { get }
    /// Records written past the committed offset, as far as the consumer knows without I/O.
    var pendingRecords: UInt64 { get }

    /// The next batch from the committed offset: at most `maxCount` records and `maxBytes` of
    /// payload (the first record is returned even if it alone is larger), skipping expired
    /// records and reporting every skipped range in `notices`. Only durable records are
    /// handed out. Reading again without a commit returns the same batch. Blocking file I/O.
    /// - Throws: `.invalidArgument` for a count or size below 1; `.io` if a file cannot be read
    ///   or synced; `.closed` once closed.
    func read(maxCount: Int, maxBytes: Int) throws -> ConsumerBatch

    /// Moves the committed offset to `end`, the seq of the next record to deliver (a batch's
    /// ``ConsumerBatch/endSeq``): every record below it is consumed.
    ///
    /// Atomic: after any crash the offset is the old value or the new one. With `.durable`
    /// the log's data below `end` is made durable first, then the offset, before this returns.
    /// Committing the offset it already has is a no-op (a durable commit of an offset only
    /// fast-committed so far makes it durable), so an empty batch commits safely.
    /// - Throws: `.invalidCommit` if `end` is below the committed offset (backwards) or past
    ///   the last record written; `.io`/`.diskFull` if a file cannot be synced or written (the
    ///   offset on disk is then the previous one); `.closed` once closed.
    func commit(upTo end: UInt64, mode: CommitMode) throws

    /// Calls `handler` with the seq past the last written record each time the log grows, until
    /// the registration is cancelled. Keep it short and non-blocking.
    /// - Throws: `.io` if the watch cannot be set up (file descriptors exhausted).
    func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) throws -> WriteObservation
}

extension LogConsumer {
    /// No epoch: every record goes out under ``logID``.
    public var epochs: LogEpochs { LogEpochs(base: logID) }
    /// Commits `batch`, skipped ranges included: ``commit(upTo:mode:)`` with its `endSeq`.
    /// An empty batch changes nothing.
    public func commit(_ batch: ConsumerBatch, mode: CommitMode = .durable) throws {
        try commit(upTo: batch.endSeq, mode: mode)
    }

    /// A durable ``commit(upTo:mode:)``.
    public func commit(upTo end: UInt64) throws {
        try commit(upTo: end, mode: .durable)
    }

    /// ``read(maxCount:maxBytes:)`` on a Dispatch thread, off the cooperative pool.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) async throws -> ConsumerBatch {
        try await offload { try self.read(maxCount: maxCount, maxBytes: maxBytes) }
    }

    /// ``commit(_:mode:)`` on a Dispatch thread, off the cooperative pool.
    public func commit(_ batch: ConsumerBatch, mode: CommitMode = .durable) async throws {
        try await offload { try self.commit(upTo: batch.endSeq, mode: mode) }
    }

    /// ``commit(upTo:mode:)`` on a Dispatch thread, off the cooperative pool.
    public func commit(upTo end: UInt64, mode: CommitMode = .durable) async throws {
        try await offload { try self.commit(upTo: end, mode: mode) }
    }

    /// The globally unique, stable id of record `seq`: `"<log id>-<seq>"`, with the id of the
    /// epoch holding `seq` (``epochs``).
    public func eventID(of seq: UInt64) -> String { epochs.eventID(seq: seq) }
}

/// How a commit is made durable.
public enum CommitMode: String, Sendable, CaseIterable {
    /// One `pwrite` and one `fdatasync` of the offset file (after making the log's data below
    /// the new offset durable). After any crash, even a power loss, the offset is this
    /// commit or a later one. The default, and what the sync worker uses.
    case durable
    /// One `pwrite`, no `fdatasync`: survives a killed process; a power loss can roll the offset
    /// back to an earlier commit (re-delivery, made harmless by event ids), never forward.
    /// Retention only deletes segments passed by a durable commit. A ``DetachedConsumer``
    /// commits durably whatever the mode (the writer's retention trusts its offset file).
    case fast
}

/// A batch read by a consumer: records, the notices met on the way, and where it ends.
public struct ConsumerBatch: Sendable, Equatable {
    /// The records, in seq order (expired records are left out and reported in `notices`).
    public var records: [Record]
    /// Ranges skipped instead of returned: corrupt, dropped, expired, missing.
    public var notices: [ReadNotice]
    /// The seq just past the last record or notice of the batch: committing up to it
    /// (`commit(batch)`) acknowledges the whole batch, skipped ranges included.
    public var endSeq: UInt64
    /// The seq the batch started at (the committed offset when it was read).
    public var startSeq: UInt64

    /// Whether the batch holds nothing: no record and no notice.
    public var isEmpty: Bool { records.isEmpty && notices.isEmpty }

    /// A batch read from `startSeq`, ending at `endSeq` (for a ``LogConsumer`` of your own,
    /// such as an in-memory one in tests).
    /// - Parameters:
    ///   - records: the records, in seq order, at or past `startSeq` and below `endSeq`.
    ///   - notices: the ranges skipped instead of returned.
    ///   - endSeq: the seq just past the last record or notice; `startSeq` when the batch is empty.
    ///   - startSeq: the committed offset the batch was read from.
    public init(records: [Record], notices: [ReadNotice] = [], endSeq: UInt64, startSeq: UInt64) {
        self.records = records
        self.notices = notices
        self.endSeq = endSeq
        self.startSeq = startSeq
    }
}

/// The queue blocking work runs on, off the cooperative pool (see ``offload(_:)``).
private let blockingWork = DispatchQueue(label: "spool.blocking", attributes: .concurrent)

/// Runs blocking work (file I/O, `fsync`, opening or closing a log) on a Dispatch thread, off
/// Swift's cooperative pool, whose few threads must never block, and resumes with its result.
/// The one such helper of the package: consumers, the sync worker's dead-letter log, the
/// collector's ledger and token file, a follower's reads and the `spool` command all use it.
///
/// - Parameter queue: where `work` runs: a concurrent queue for blocking work by default; a
///   serial queue of the caller's when calls must run one at a time, in order.
/// - Throws: whatever `work` throws.
package func offload<T: Sendable>(on queue: DispatchQueue? = nil, _ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        (queue ?? blockingWork).async { continuation.resume(with: Result { try work() }) }
    }
}
