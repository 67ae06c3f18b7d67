import Dispatch
import Foundation

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
    /// The seq just past the last record or notice of the batch: committing through
    /// `endSeq - 1` acknowledges the whole batch, skipped ranges included.
    public var endSeq: UInt64
    /// The seq the batch started at (the committed offset when it was read).
    public var startSeq: UInt64

    /// Whether the batch holds nothing: no record and no notice.
    public var isEmpty: Bool { records.isEmpty && notices.isEmpty }
}

/// A named reader of a log with an offset committed atomically on disk.
///
/// `read` returns the next batch from the committed offset; reading again without a commit
/// returns the same records. `commit(through:)` advances the offset atomically; retention then
/// deletes the sealed segments every consumer has passed.
///
/// Thread-safety: all methods may be called from any thread; calls are serialised. The
/// blocking methods do file I/O (not for the cooperative pool); the `async` ones run it on the
/// consumer's own dispatch queue.
public final class Consumer: @unchecked Sendable {
    /// The consumer's name.
    public let name: String
    /// The log it reads.
    public let log: EventLog
    private let lock = NSLock()
    private let offsetFile: OffsetFile
    /// This process's hold on the consumer (`consumers/<name>.lock`): a ``DetachedConsumer``
    /// of the same name in another process gets `.locked`, and so would this one beside it.
    private let committerLock: DirectoryLock
    /// Guarded by `lock`. Internal for tests.
    let cursor: LogCursor
    private let queue: DispatchQueue
    /// Guarded by `lock`: the next seq to deliver (including fast commits).
    private var committedSeq: UInt64
    /// Guarded by `lock`: the offset of the last durable commit (or the one found at open,
    /// which opening made durable): a durable commit of an offset only fast-committed so far
    /// still has work to do.
    private var durableSeq: UInt64
    /// Guarded by `lock`: expired records below this seq were already counted.
    private var expiryCountedThrough: UInt64 = 0

    init(name: String, log: EventLog) throws {
        self.name = name
        self.log = log
        let path = Consumers.path(of: name, logDirectory: log.directory)
        let folder = Consumers.directory(of: log.directory)
        // The committer's lock first: a consumer that a committer in another process made
        // (or holds) is never made again over its offset file.
        try DirectoryIO.create(folder, permissions: log.configuration.directoryMode, insideLog: true)
        let committerLock = try DirectoryLock(consumer: name, logDirectory: log.directory, permissions: log.configuration.fileMode)
        let slot: OffsetSlot
        do {
            if !DirectoryIO.exists(path) {
                // Registered at the oldest stored record in the same step that reads it, before
                // the file is made (several fsyncs): retention run meanwhile by another consumer's
                // commit then keeps what this one starts at. Unregistered if the file cannot be
                // made, so a consumer that does not exist never holds retention back.
                let start = log.lock.withLock {
                    let start = log.state.firstSeq
                    log.state.consumerOffsets[name] = start
                    return start
                }
                do {
                    try OffsetFile.create(path, directory: folder, nextSeq: start, permissions: log.configuration.fileMode)
                } catch {
                    log.lock.withLock { _ = log.state.consumerOffsets.removeValue(forKey: name) }
                    throw error
                }
            }
            guard let read = try OffsetFile.read(path) else {
                throw SpoolError(.corrupt, "consumer \(name)'s offset file has no valid slot", path: path)
            }
            slot = read
            offsetFile = try OffsetFile(path: path, slot: slot)
        } catch {
            committerLock.release()  // any failure after the lock: another committer may take it
            throw error
        }
        self.committerLock = committerLock
        // Read after the lock is held: a committer in another process may have moved it.
        log.lock.withLock { log.state.consumerOffsets[name] = slot.nextSeq }
        committedSeq = slot.nextSeq
        durableSeq = slot.nextSeq
        cursor = LogCursor(log: log, from: slot.nextSeq, durableOnly: true)
        queue = DispatchQueue(label: "spool.consumer.\(name)")
    }

    deinit { committerLock.release() }

    /// Lets another committer take the consumer (the log is closing).
    func releaseCommitterLock() { committerLock.release() }

    /// The committed offset: the seq of the next record to deliver.
    public var committed: UInt64 { lock.withLock { committedSeq } }

    /// The globally unique, stable id of record `seq`: `"<log id>-<seq>"`.
    public func eventID(of seq: UInt64) -> String { log.id.eventID(seq: seq) }

    /// Records and bytes not yet committed.
    public var lag: ConsumerLag {
        let from = committed
        return log.lock.withLock {
            ConsumerLag(from: from, nextSeq: log.state.nextSeq, segments: log.state.segments, pendingBytes: log.state.pendingBytes)
        }
    }

    /// The next batch from the committed offset: at most `maxCount` records and `maxBytes` of
    /// payload (the first record is returned even if it alone is larger), skipping expired
    /// records and reporting every skipped range in `notices`.
    ///
    /// Only durable records are delivered (Kafka's high watermark): when the durable records
    /// end before the batch is full and written ones follow, the read has them synced (one
    /// `fdatasync` on the writer, shared with any group commit) and goes on, so nothing a
    /// consumer delivered can vanish in a power loss and have its seq handed out again to
    /// another record. If the log cannot sync (it failed, or is stalled and its next retry
    /// fails too), the read returns what is already durable.
    ///
    /// Reading again without a commit returns the same batch. Blocking file I/O.
    /// - Throws: `.invalidArgument` for a count or size below 1; `.io` if a file cannot be read;
    ///   `.closed` once the log is closed.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) throws -> ConsumerBatch {
        guard maxCount >= 1, maxBytes >= 1 else {
            throw SpoolError(.invalidArgument, "read(maxCount: \(maxCount), maxBytes: \(maxBytes)): both must be at least 1")
        }
        try checkLogOpen()
        lock.lock()
        defer { lock.unlock() }
        let start = committedSeq
        cursor.seek(to: start)
        var batch = ConsumerBatch(records: [], notices: [], endSeq: start, startSeq: start)
        var filling = BatchFill(maxCount: maxCount, maxBytes: maxBytes, expiry: Expiry(configuration: log.configuration, now: wallClockMillis()))
        try filling.fill(&batch, from: cursor, countingExpiry: &expiryCountedThrough)
        // Room left, and written records past the durable ones: have the writer sync them (one
        // fdatasync, shared with group commit), then go on. A batch the durable records filled
        // costs no sync.
        if !filling.isFull(batch) {
            let (written, synced) = log.lock.withLock { (log.state.writtenThrough, log.state.syncedThrough) }
            if synced < written, (try? log.waitUntilBlocking(written - 1, is: .synced)) != nil {
                try filling.fill(&batch, from: cursor, countingExpiry: &expiryCountedThrough)
            }
        }
        return finish(batch, expired: filling.newlyExpired)
    }

    /// Throws `.closed` once the log is closing: its directory lock is then released, and
    /// another process may own the files.
    private func checkLogOpen() throws {
        if log.lock.withLock({ log.state.closeRequested }) { throw SpoolError(.closed, "consumer \(name): the log is closed") }
    }

    private func finish(_ batch: ConsumerBatch, expired: UInt64) -> ConsumerBatch {
        if expired > 0 {
            log.lock.withLock { log.state.counters.expiredRecords += expired }
            log.metrics.expiredRecords.increment(by: Int(expired))
        }
        return batch
    }

    /// Commits every record through `seq`: the next read starts at `seq + 1`.
    ///
    /// Atomic: after any crash the offset is the old value or the new one. With `.durable`
    /// (the default) the log's data through `seq` is made durable first, then the offset, before
    /// this returns; then retention deletes the sealed segments every consumer has passed.
    /// Committing the offset it already has is a no-op (a durable commit of an offset only
    /// fast-committed so far makes it durable). If deleting passed segments fails, the commit
    /// stands: the failure is logged and retention runs again at the next durable commit.
    /// - Throws: `.invalidCommit` if `seq + 1` is below the committed offset (backwards) or `seq`
    ///   was never appended; `.io`/`.diskFull` if the offset file cannot be written (the offset on
    ///   disk is then the previous one); `.closed` once the log is closed.
    public func commit(through seq: UInt64, mode: CommitMode = .durable) throws {
        lock.lock()
        defer { lock.unlock() }
        let next = seq &+ 1
        guard seq != UInt64.max else { throw SpoolError(.invalidCommit, "cannot commit through seq \(seq)") }
        try checkLogOpen()
        if next == committedSeq && (mode == .fast || next == durableSeq) { return }
        guard next >= committedSeq else {
            throw SpoolError(.invalidCommit, "consumer \(name): committing through \(seq) would move the offset backwards from \(committedSeq)")
        }
        let appended = log.nextSeq
        guard next <= appended else {
            throw SpoolError(.invalidCommit, "consumer \(name): cannot commit through \(seq); the last appended record is \(appended == 0 ? "none" : String(appended - 1))")
        }
        // Never persist an offset past data that is not yet as durable as the offset itself.
        try log.waitUntilBlocking(seq, is: mode == .durable ? .synced : .written)
        try offsetFile.commit(next, durable: mode == .durable)
        committedSeq = next
        if mode == .durable {
            durableSeq = next
            log.lock.withLock { log.state.consumerOffsets[name] = next }
            do { try log.applyRetention() } catch {
                log.logger.warning("retention could not delete passed segments; it runs again at the next durable commit",
                                   metadata: ["consumer": "\(name)", "error": "\(error)"])
            }
        }
    }

    /// ``read(maxCount:maxBytes:)`` on the consumer's own queue, off the cooperative pool.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) async throws -> ConsumerBatch {
        try await offload { try self.read(maxCount: maxCount, maxBytes: maxBytes) }
    }

    /// ``commit(through:mode:)`` on the consumer's own queue, off the cooperative pool.
    public func commit(through seq: UInt64, mode: CommitMode = .durable) async throws {
        try await offload { try self.commit(through: seq, mode: mode) }
    }

    private func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
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
