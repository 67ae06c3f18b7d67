import Dispatch
import Foundation
import Logging
import Synchronization

/// A consumer of a log that another process writes: a sidecar (`spool sync --sidecar`, an
/// agent that ships what an app appends), or any reader that commits while the writer runs.
///
/// It never takes the writer's lock, so the writer opens, appends and closes beside it, and it
/// works as well when no writer is running. What it shares with the writer:
/// - **The offset file** (`consumers/<name>.offset`), which only this consumer writes, with
///   durable commits only. One committer per consumer: it holds `consumers/<name>.lock` (a
///   second one, in any process, a ``Consumer`` of the writer's included, gets `.locked`).
/// - **Retention.** The writer reads the offset files of consumers it did not make when it
///   decides what to delete (after each segment it seals, and after its own consumers'
///   commits), so what this consumer has not committed is never deleted by retention. The cap
///   (`dropOldest`) may still drop it, as it would for the writer's own consumers: those
///   records read as a *dropped* notice.
/// - **Durability.** Like ``Consumer``, it hands out only durable records: before a read
///   returns, it `fdatasync`s the segment files its records are in (the writer may have
///   written them without syncing; the sync of one process makes the file's data durable for
///   all), so a commit never passes data a power loss could take back.
///
/// It reads what is whole on disk, as a ``LogFollower`` does (FORMAT.md §6.1). A new consumer
/// (`creating`) starts at the oldest stored record; if the writer's retention deletes that
/// segment in the instant before the offset file appears, the first read reports it *dropped*.
/// Expiry (`maxAge`, `reportingDeadline`) follows the `configuration` given here.
///
/// Thread-safety: every method may be called from any thread; calls are serialised. The
/// blocking methods do file I/O (not for the cooperative pool); the `async` ones run it on the
/// consumer's own dispatch queue.
public final class DetachedConsumer: @unchecked Sendable {
    /// The consumer's name.
    public let name: String
    /// The log's directory.
    public let directory: String
    /// The log's identity.
    public let logID: LogID

    private let lock = NSLock()
    private let snapshot: LogSnapshot
    private let live: LiveSegments
    private let cursor: LogCursor
    private let offsetFile: OffsetFile
    private let committerLock: DirectoryLock
    private let configuration: Configuration
    private let queue: DispatchQueue
    /// Guarded by `lock`: the next seq to deliver.
    private var committedSeq: UInt64
    /// Guarded by `lock`: every record below this seq is durable (synced by this consumer).
    private var durableSeq: UInt64
    private let closed = Mutex(false)

    /// Opens the consumer `name` of the log in `directory`, beside whatever process writes it.
    /// - Parameters:
    ///   - directory: the log's directory; it must hold a log.
    ///   - name: the consumer; 1 to 64 characters from `A-Z a-z 0-9 . _ -`.
    ///   - creating: make the consumer (at the oldest stored record) if it does not exist.
    ///   - configuration: its encryption keys (to read encrypted blocks), expiry rules, and
    ///     file modes are used.
    ///   - logger: where opening logs what recovery would repair, never payloads.
    /// - Throws: ``SpoolError`` `.invalidConsumerName`; `.invalidArgument` if the consumer does
    ///   not exist and `creating` is false; `.locked` if another committer has it;
    ///   `.corrupt` if its offset file has no valid slot (a writing open repairs it); what
    ///   ``LogSnapshot/init(directory:configuration:logger:)`` throws.
    public init(directory: String, name: String, creating: Bool = false, configuration: Configuration = Configuration(),
                logger: Logger = Logger(label: "spool")) throws {
        try Consumers.validate(name)
        let snapshot = try LogSnapshot(directory: directory, configuration: configuration, logger: logger)
        var held: DirectoryLock?
        do {
            let path = Consumers.path(of: name, logDirectory: directory)
            let folder = Consumers.directory(of: directory)
            if !DirectoryIO.exists(path) {
                guard creating else {
                    throw SpoolError(.invalidArgument, "consumer \(name) does not exist (create it with creating: true)", path: directory)
                }
                try DirectoryIO.create(folder, permissions: configuration.directoryMode, insideLog: true)
            }
            let committerLock = try DirectoryLock(consumer: name, logDirectory: directory, permissions: configuration.fileMode)
            held = committerLock
            if !DirectoryIO.exists(path) {
                let start = snapshot.segments.first?.baseSeq ?? snapshot.endSeq
                try OffsetFile.create(path, directory: folder, nextSeq: start, permissions: configuration.fileMode)
            }
            guard let slot = try OffsetFile.read(path) else {
                throw SpoolError(.corrupt, "consumer \(name)'s offset file has no valid slot (opening the log for writing resets it)", path: path)
            }
            offsetFile = try OffsetFile(path: path, slot: slot)
            self.committerLock = committerLock
            committedSeq = slot.nextSeq
            durableSeq = slot.nextSeq
        } catch {
            held?.release()
            snapshot.close()
            throw error
        }
        self.name = name
        self.directory = directory
        self.snapshot = snapshot
        self.configuration = configuration
        logID = snapshot.id
        live = LiveSegments(snapshot: snapshot)
        cursor = LogCursor(log: live, from: committedSeq)
        queue = DispatchQueue(label: "spool.detached-consumer.\(name)")
    }

    deinit { close() }

    /// Releases the consumer (its lock, so another committer may take it) and its files.
    /// Calls after it throw `.closed`. Closing twice is harmless.
    public func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard first else { return }
        committerLock.release()
        snapshot.close()
    }

    /// The committed offset: the seq of the next record to deliver.
    public var committed: UInt64 { lock.withLock { committedSeq } }

    /// Records written past the committed offset, as of the last look at the log (no I/O).
    public var pendingRecords: UInt64 {
        let end = live.readableSegments(durableOnly: false).end
        let from = committed
        return end > from ? end - from : 0
    }

    /// The next batch from the committed offset, as a ``Consumer`` reads it: at
    /// most `maxCount` records and `maxBytes` of payload (the first record even if larger),
    /// skipped ranges in `notices`, and only records made durable (this consumer syncs the
    /// segment files they are in). Reading again without a commit returns the same batch.
    /// - Throws: `.invalidArgument` for a count or size below 1; `.io` if a file cannot be read
    ///   or synced; `.closed` once closed.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) throws -> ConsumerBatch {
        guard maxCount >= 1, maxBytes >= 1 else {
            throw SpoolError(.invalidArgument, "read(maxCount: \(maxCount), maxBytes: \(maxBytes)): both must be at least 1")
        }
        lock.lock()
        defer { lock.unlock() }
        try checkOpen()
        let start = committedSeq
        cursor.seek(to: start)
        var batch = ConsumerBatch(records: [], notices: [], endSeq: start, startSeq: start)
        var filling = BatchFill(maxCount: maxCount, maxBytes: maxBytes, expiry: Expiry(configuration: configuration, now: wallClockMillis()))
        var uncounted: UInt64 = 0  // no expiry counter here: the writer's metrics are its own consumers'
        try filling.fill(&batch, from: cursor, countingExpiry: &uncounted)
        // Room left: look at the log again (what the writer wrote since the last look), and go on.
        if !filling.isFull(batch) {
            try live.refresh()
            try filling.fill(&batch, from: cursor, countingExpiry: &uncounted)
        }
        return try durable(batch)
    }

    /// Commits every record through `seq`, durably: the data through it first (this consumer
    /// syncs what it did not read), then the offset. The writer's retention may then delete
    /// what every consumer has passed.
    /// - Throws: `.invalidCommit` if `seq + 1` is below the committed offset or `seq` is not
    ///   written yet; `.io`/`.diskFull` if a file cannot be synced or written (the offset on
    ///   disk is then the previous one); `.closed` once closed.
    public func commit(through seq: UInt64) throws {
        lock.lock()
        defer { lock.unlock() }
        try checkOpen()
        guard seq != UInt64.max else { throw SpoolError(.invalidCommit, "cannot commit through seq \(seq)") }
        let next = seq + 1
        if next == committedSeq { return }
        guard next >= committedSeq else {
            throw SpoolError(.invalidCommit, "consumer \(name): committing through \(seq) would move the offset backwards from \(committedSeq)")
        }
        if next > durableSeq {
            try live.refresh()
            let end = live.readableSegments(durableOnly: false).end
            guard next <= end else {
                throw SpoolError(.invalidCommit, "consumer \(name): cannot commit through \(seq); the last written record is \(end == 0 ? "none" : String(end - 1))")
            }
            try syncSegments(through: next)
        }
        try offsetFile.commit(next, durable: true)
        committedSeq = next
    }

    /// ``read(maxCount:maxBytes:)`` on the consumer's own queue, off the cooperative pool.
    public func read(maxCount: Int = 50, maxBytes: Int = 512 * 1024) async throws -> ConsumerBatch {
        try await offload { try self.read(maxCount: maxCount, maxBytes: maxBytes) }
    }

    /// ``commit(through:)`` on the consumer's own queue, off the cooperative pool.
    public func commit(through seq: UInt64) async throws {
        try await offload { try self.commit(through: seq) }
    }

    /// Calls `handler` with the seq past the last whole record each time the log's directory
    /// changes (inotify on Linux, a look every 10 ms elsewhere), on a thread of its own, until
    /// the registration is cancelled. Keep it short and non-blocking.
    /// - Throws: `.io` if the wake-up cannot be set up (file descriptors exhausted).
    public func watchWrites(_ handler: @escaping @Sendable (UInt64) -> Void) throws -> WriteObservation {
        let wakeup = try Wakeup(watching: directory)
        let live = self.live
        let thread = Thread {
            var last = live.readableSegments(durableOnly: false).end
            while !wakeup.isStopped {
                wakeup.drain()
                if (try? live.refresh()) != nil {
                    let end = live.readableSegments(durableOnly: false).end
                    if end != last {
                        last = end
                        handler(end)
                    }
                }
                wakeup.wait()
            }
            wakeup.release()
        }
        thread.name = "spool-detached-watch"
        thread.start()
        return WriteObservation { wakeup.stop() }
    }

    /// `batch`, once the segment files holding its records are durable.
    private func durable(_ batch: ConsumerBatch) throws -> ConsumerBatch {
        if batch.endSeq > durableSeq { try syncSegments(through: batch.endSeq) }
        return batch
    }

    /// `fdatasync`s every segment file holding records in `durableSeq..<end`. Lock held.
    private func syncSegments(through end: UInt64) throws {
        let segments = live.readableSegments(durableOnly: false).segments
        for (index, segment) in segments.enumerated() {
            let segmentEnd = index + 1 < segments.count ? segments[index + 1].baseSeq : UInt64.max
            guard segmentEnd > durableSeq, segment.baseSeq < end else { continue }
            do {
                let file = try FileIO.open(directory + "/" + segment.name, .readOnly)
                defer { file.close() }
                try file.syncData()
            } catch let error as SpoolError where error.errno == .noSuchFileOrDirectory {
                continue  // deleted by the writer (the cap): nothing of it to keep
            }
        }
        durableSeq = max(durableSeq, end)
    }

    private func checkOpen() throws {
        if closed.withLock({ $0 }) { throw SpoolError(.closed, "consumer \(name) is closed") }
    }

    private func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
