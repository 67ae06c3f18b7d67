
/// How a commit is made durable.
public enum CommitMode: String, Sendable, CaseIterable {
    /// One `pwrite` and one `fdatasync` of the offset file (after making the log's data through
    /// the committed record durable). After any crash, even a power loss, the offset is this
    /// commit or a later one. The default, and what the sync worker uses.
    case durable
    /// One `pwrite`, no `fdatasync`: survives a killed process; a power loss can roll the offset
    /// back to an earlier commit (re-delivery, made harmless by event ids), never forward.
    /// Retention only deletes segments passed by a durable commit.
    case fast
}

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
            ConsumerLag(from: from, nextSeq: log.state.nextSeq, segments: log.state.segments, pendingBytes: log.state.pendingBytes)
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

/// Limits and tallies of one consumer read (``Consumer`` and ``DetachedConsumer``): fills a
/// batch from a cursor until it holds `maxCount` records or `maxBytes` of payload, or has
/// examined `max(maxCount, 100,000)` items (so a long run of expired records cannot make one
/// read walk the whole log or hold a notice per record: consecutive expired records are one
/// notice).
struct BatchFill {
    let maxCount: Int
    let maxBytes: Int
    let expiry: Expiry
    var bytes = 0
    var examined = 0
    /// Expired records counted by this read (not counted by an earlier one).
    var newlyExpired: UInt64 = 0
    /// Set when the next record would pass `maxBytes`.
    var stoppedForBytes = false

    func isFull(_ batch: ConsumerBatch) -> Bool {
        stoppedForBytes || batch.records.count >= maxCount || examined >= max(maxCount, 100_000)
    }

    /// Reads from `cursor` into `batch` until it is full or the cursor has nothing more.
    /// `countedThrough`: expired records below it were counted by an earlier read.
    mutating func fill(_ batch: inout ConsumerBatch, from cursor: LogCursor, countingExpiry countedThrough: inout UInt64) throws {
        while !isFull(batch) {
            let before = cursor.position
            guard let item = try cursor.next() else { return }
            examined += 1
            switch item {
            case .notice(let notice):
                Self.append(notice, to: &batch.notices)
                batch.endSeq = notice.range.upperBound
            case .record(let record):
                if expiry.isExpired(record.timestamp) {
                    Self.append(ReadNotice(kind: .expired, range: record.seq..<record.seq + 1, detail: expiry.reason), to: &batch.notices)
                    if record.seq >= countedThrough {
                        newlyExpired += 1
                        countedThrough = record.seq + 1
                    }
                    batch.endSeq = record.seq + 1
                    continue
                }
                if !batch.records.isEmpty && bytes + record.payload.count > maxBytes {
                    cursor.seek(to: before)
                    stoppedForBytes = true
                    return
                }
                bytes += record.payload.count
                batch.records.append(record)
                batch.endSeq = record.seq + 1
            }
        }
    }

    /// Merges consecutive notices of one kind so a long expired run is one notice.
    private static func append(_ notice: ReadNotice, to notices: inout [ReadNotice]) {
        if let last = notices.last, last.kind == notice.kind, last.range.upperBound == notice.range.lowerBound,
           notice.kind == .expired {
            notices[notices.count - 1].range = last.range.lowerBound..<notice.range.upperBound
        } else {
            notices.append(notice)
        }
    }
}

/// The expiry rules of a configuration, evaluated at one instant.
struct Expiry {
    let cutoff: Int64?
    let deadline: ReportingDeadline?
    let now: Int64

    init(configuration: Configuration, now: Int64) {
        self.now = now
        if let age = configuration.maxAge {
            let (seconds, attoseconds) = age.components
            cutoff = now - (seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        } else {
            cutoff = nil
        }
        deadline = configuration.reportingDeadline
    }

    @inline(__always)
    func isExpired(_ timestamp: Int64) -> Bool {
        if let cutoff, timestamp < cutoff { return true }
        if let deadline, now >= deadline.expiry(ofRecordAt: timestamp) { return true }
        return false
    }

    var reason: String {
        cutoff != nil ? "older than Configuration.maxAge" : "past Configuration.reportingDeadline"
    }
}
