/// Records and bytes a consumer has not committed yet.
public struct ConsumerLag: Sendable, Equatable {
    /// Records appended at or after the committed offset.
    public var records: UInt64
    /// Stored (compressed) bytes of the segments holding them, plus bytes still pending in memory.
    public var bytes: Int64
}

extension ConsumerLag {
    /// The lag of an offset at `from` in a log with these segments and pending bytes.
    init(from: UInt64, nextSeq: UInt64, segments: [SegmentInfo], pendingBytes: Int) {
        records = nextSeq > from ? nextSeq - from : 0
        var bytes = Int64(pendingBytes)
        for (index, segment) in segments.enumerated() {
            let end = index + 1 < segments.count ? segments[index + 1].baseSeq : UInt64.max
            if end > from { bytes += segment.size }
        }
        self.bytes = records == 0 ? 0 : bytes
    }
}

/// A consumer of a log this process writes: a named reader with an offset committed
/// atomically on disk (see ``LogConsumer``), made by ``EventLog/consumer(named:)``.
///
/// Only durable records are delivered (Kafka's high watermark): when the durable records end
/// before a batch is full and written ones follow, the read has the writer sync them (one
/// `fdatasync`, shared with any group commit) and goes on. If the log cannot sync (it failed,
/// or is stalled and its next retry fails too), the read returns what is already durable.
/// A durable commit then runs retention, which deletes the sealed segments every consumer has
/// passed; if deleting fails, the commit stands (the failure is logged and retention runs
/// again at the next durable commit). Reads and commits throw `.closed` once the log is closed.
///
/// Thread-safety: all methods may be called from any thread; calls are serialised.
public final class Consumer: LogConsumer, @unchecked Sendable {
    /// The consumer's name.
    public let name: String
    /// The log it reads.
    public let log: EventLog
    let committer: Committer

    init(name: String, log: EventLog) throws {
        self.name = name
        self.log = log
        committer = try Committer(name: name, directory: log.directory, configuration: log.configuration, creating: true, log: log)
    }

    /// Lets another committer take the consumer (the log is closing).
    func releaseCommitterLock() { committer.close() }

    /// Internal for tests.
    var cursor: LogCursor { committer.cursor }

    /// The log's id (`log.id`).
    public var logID: LogID { log.id }
    /// The ids the log's records are sent under (`log.epochs`).
    public var epochs: LogEpochs { log.epochs }
    /// The log's directory (`log.directory`).
    public var directory: String { log.directory }
    /// The log's configuration (`log.configuration`).
    public var configuration: Configuration { log.configuration }
    /// The committed offset: the seq of the next record to deliver.
    public var committed: UInt64 { committer.committed }
    /// The records appended at or after the committed offset (`lag.records`); no file I/O.
    public var pendingRecords: UInt64 { lag.records }

    /// Records and bytes not yet committed.
    public var lag: ConsumerLag {
        let from = committed
        return log.lock.withLock {
            ConsumerLag(from: from, nextSeq: log.state.nextSeq, segments: log.state.table.segments, pendingBytes: log.state.pending.bytes)
        }
    }

    /// The next batch from the committed offset (``LogConsumer/read(maxCount:maxBytes:)``):
    /// durable records only, the writer syncing written ones when the batch has room.
    /// - Throws: `.invalidArgument` for a count or size below 1; `.io` if a file cannot be read;
    ///   `.closed` once the log is closed.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) throws -> ConsumerBatch { try committer.read(maxCount: maxCount, maxBytes: maxBytes) }

    /// Moves the committed offset to `end` (``LogConsumer/commit(upTo:mode:)``): `.durable`
    /// has the writer sync the records below `end`, writes the offset and `fdatasync`s it, then
    /// runs retention; `.fast` waits only until they are written and skips the `fdatasync`.
    /// - Throws: `.invalidCommit` if `end` is below the committed offset or past the last
    ///   appended record; `.io`/`.diskFull` if the offset file cannot be written (the offset on
    ///   disk is then the previous one); `.closed` once the log is closed.
    public func commit(upTo end: UInt64, mode: CommitMode) throws { try committer.commit(upTo: end, mode: mode) }

    /// The log's ``EventLog/observeWrites(_:)``: `handler` is called after each write with the
    /// seq just past the last written record, on the thread that wrote it. Never throws.
    public func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) throws -> WriteObservation {
        log.observeWrites(handler)
    }
}
