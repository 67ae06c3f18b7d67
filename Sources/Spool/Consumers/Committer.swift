import Foundation
import Synchronization

/// What differs between a consumer in the writing process (``Consumer``, reading the
/// ``EventLog``) and one beside it (``DetachedConsumer``, reading ``LiveSegments``): where the
/// segment list comes from (the ``RecordSource`` half) and who makes records durable before
/// they are handed out or committed past. Everything else is the ``Committer``'s.
protocol ConsumedLog: RecordSource {
    /// Throws `.closed` once the log may not be read or committed any more.
    func checkOpen(consumer name: String) throws
    /// Where a consumer made now starts (the oldest stored record), noted with retention
    /// before its offset file is made: retention run meanwhile then keeps what it starts at.
    func registerNewConsumer(_ name: String) -> UInt64
    /// Undoes ``registerNewConsumer(_:)`` when the offset file could not be made.
    func forgetNewConsumer(_ name: String)
    /// The committer opened consumer `name` at `next` (read once its lock is held).
    func consumerOpened(_ name: String, at next: UInt64)
    /// A read filled less than a batch: makes more records readable, and says whether to
    /// read again (the writer syncs what it wrote; a live view looks at the directory again).
    func readMore() throws -> Bool
    /// The seq past the last record a commit may pass, and how that record is described
    /// ("appended", "written").
    func commitBound(for end: UInt64) throws -> (end: UInt64, what: String)
    /// Makes the records below `end` durable at `level`: the writer's sync (or write, for a
    /// fast commit), or `fdatasync` of the segment files holding them.
    func makeDurable(upTo end: UInt64, level: Durability) throws
    /// Whether a `.fast` commit stays fast (a committer beside the writer commits durably
    /// only: the writer's retention reads its file).
    var allowsFastCommits: Bool { get }
    /// A durable commit moved consumer `name` to `next`: retention may delete what it passed.
    func committedDurably(_ name: String, at next: UInt64)
    /// `count` expired records were met by a read for the first time.
    func countExpired(_ count: UInt64)
}

/// The one committer of a consumer, in whichever process: its lock (`consumers/<name>.lock`),
/// its offset file, its committed and durable offsets, its reads and the checks of its
/// commits. ``Consumer`` and ``DetachedConsumer`` each hold one over their ``ConsumedLog``.
///
/// Thread-safety: every method may be called from any thread; reads and commits are
/// serialised by the committer lock (a ``RankedLock``), which is taken before the log's lock and
/// never while holding it (`Architecture.md`, "Lock order").
final class Committer: @unchecked Sendable {
    let name: String
    let log: any ConsumedLog
    private let configuration: Configuration
    /// The committer lock: serialises reads and commits, guards the `var`s below, `offsetFile`
    /// and `cursor`.
    private let lock = RankedLock(.committer)
    private let offsetFile: OffsetFile
    /// This process's hold on the consumer: a second committer of the name, in this process or
    /// another, gets `.locked`.
    private let committerLock: DirectoryLock
    /// Guarded by `lock`. Internal for tests.
    let cursor: LogCursor
    /// The next seq to deliver (including fast commits).
    private var committedSeq: UInt64
    /// The offset of the last durable commit (or the one found at open, which opening made
    /// durable): a durable commit of an offset only fast-committed so far still has work to do.
    private var durableSeq: UInt64
    /// Expired records below this seq were already counted.
    private var expiryCountedThrough: UInt64 = 0
    private let closed = Atomic(false)

    /// Opens (or, with `creating`, makes) consumer `name` of the log in `directory`.
    /// - Throws: `.invalidArgument` if it does not exist and `creating` is false; `.locked` if
    ///   another committer has it; `.corrupt` if its offset file has no valid slot; `.io`.
    init(name: String, directory: String, configuration: Configuration, creating: Bool, log: any ConsumedLog) throws {
        let path = Consumers.path(of: name, logDirectory: directory)
        let folder = Consumers.directory(of: directory)
        if !DirectoryIO.exists(path) {
            guard creating else {
                throw SpoolError(.invalidArgument, "consumer \(name) does not exist (create it with creating: true)", path: directory)
            }
            try DirectoryIO.create(folder, permissions: configuration.directoryMode, insideLog: true)
        }
        // The committer's lock first: a consumer that a committer in another process made (or
        // holds) is never made again over its offset file.
        let committerLock = try DirectoryLock(consumer: name, logDirectory: directory, permissions: configuration.fileMode)
        let slot: OffsetSlot
        do {
            if !DirectoryIO.exists(path) {
                let start = log.registerNewConsumer(name)
                do {
                    try OffsetFile.create(path, directory: folder, nextSeq: start, permissions: configuration.fileMode)
                } catch {
                    log.forgetNewConsumer(name)
                    throw error
                }
            }
            guard let read = try OffsetFile.read(path) else {
                throw SpoolError(.corrupt, "consumer \(name)'s offset file has no valid slot (opening the log for writing resets it)", path: path)
            }
            slot = read
            offsetFile = try OffsetFile(path: path, slot: slot)
        } catch {
            committerLock.release()  // any failure after the lock: another committer may take it
            throw error
        }
        self.name = name
        self.log = log
        self.configuration = configuration
        self.committerLock = committerLock
        committedSeq = slot.nextSeq
        durableSeq = slot.nextSeq
        log.consumerOpened(name, at: slot.nextSeq)
        cursor = LogCursor(log: log, from: slot.nextSeq, durableOnly: true)
    }

    deinit { committerLock.release() }

    /// Lets another committer take the consumer; reads and commits then throw `.closed`.
    /// Closing twice is harmless.
    func close() {
        closed.store(true, ordering: .releasing)
        committerLock.release()
        // Its files too (a suspended writer holds none): after a read or commit in progress,
        // which the committer lock lets finish; the next one throws `.closed`.
        lock.withLock {
            offsetFile.close()
            cursor.releaseFiles()
        }
    }

    private func checkOpen() throws {
        if closed.load(ordering: .acquiring) { throw SpoolError(.closed, "consumer \(name) is closed") }
        try log.checkOpen(consumer: name)
    }

    /// The committed offset: the seq of the next record to deliver.
    var committed: UInt64 { lock.withLock { committedSeq } }

    /// The next batch from the committed offset; see ``LogConsumer/read(maxCount:maxBytes:)``.
    func read(maxCount: Int, maxBytes: Int) throws -> ConsumerBatch {
        guard maxCount >= 1, maxBytes >= 1 else {
            throw SpoolError(.invalidArgument, "read(maxCount: \(maxCount), maxBytes: \(maxBytes)): both must be at least 1")
        }
        return try locked {
            let start = committedSeq
            cursor.seek(to: start)
            var batch = ConsumerBatch(records: [], notices: [], endSeq: start, startSeq: start)
            var filling = BatchFill(maxCount: maxCount, maxBytes: maxBytes, expiry: Expiry(configuration: configuration, now: wallClockMillis()))
            try filling.fill(&batch, from: cursor, countingExpiry: &expiryCountedThrough)
            // Room left: make more readable (a batch the first look filled costs nothing), go on.
            if !filling.isFull(batch), try log.readMore() {
                try filling.fill(&batch, from: cursor, countingExpiry: &expiryCountedThrough)
            }
            if !batch.isEmpty { try log.makeDurable(upTo: batch.endSeq, level: .synced) }
            if filling.newlyExpired > 0 { log.countExpired(filling.newlyExpired) }
            return batch
        }
    }

    /// Moves the offset to `end`; see ``LogConsumer/commit(upTo:mode:)``.
    func commit(upTo end: UInt64, mode: CommitMode) throws {
        try locked {
            let durable = mode == .durable || !log.allowsFastCommits
            if end == committedSeq && (!durable || end == durableSeq) { return }
            guard end >= committedSeq else {
                throw SpoolError(.invalidCommit, "consumer \(name): committing up to \(end) would move the offset backwards from \(committedSeq)")
            }
            let bound = try log.commitBound(for: end)
            guard end <= bound.end else {
                let last = bound.end == 0 ? "none" : String(bound.end - 1)  // a seq, for people
                throw SpoolError(.invalidCommit, "consumer \(name): cannot commit up to \(end); the last \(bound.what) record is \(last)")
            }
            // Never persist an offset past data that is not yet as durable as the offset itself.
            try log.makeDurable(upTo: end, level: durable ? .synced : .written)
            try offsetFile.commit(end, durable: durable)
            committedSeq = end
            if durable {
                durableSeq = end
                log.committedDurably(name, at: end)
            }
        }
    }

    /// Runs `body` under the committer lock, once the consumer is known to be open.
    private func locked<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        try checkOpen()
        return try body()
    }
}
