/// A segment file of the log, as the log's shared state knows it.
struct SegmentInfo: Sendable, Equatable {
    /// The seq of the segment's first record (its name).
    var baseSeq: UInt64
    /// Bytes of the file that hold valid data (for the active segment: what the writer has written).
    var size: Int64
    var name: String { Format.segmentName(baseSeq) }
}

/// Where the log is in its life.
enum LogStatus {
    case open
    /// A write failed (`ENOSPC`, `EIO`, ...): the blocks stay pending and the writer retries;
    /// new appends are refused with the error until a retry succeeds.
    case stalled(SpoolError)
    /// An `fsync` failed: the data it covered cannot be trusted. Writes are refused until reopen.
    case failed(SpoolError)
    case closing
    case closed
}

/// What a caller waits for: every record below `end` at its level.
struct Wait {
    /// The end (exclusive) of the records waited for.
    var end: UInt64
    /// The record an error names (``SpoolError/seq``): the appended one, for an append that
    /// waits; nil for a wait on a range, whose error names the first record that did not
    /// reach its level.
    var record: UInt64?
}

/// A caller waiting for records to be written or synced.
struct Waiter {
    enum Kind {
        /// Unsafe rather than checked: one allocation less per synced append. The waiter list is
        /// the only owner; every path that removes a waiter resumes it exactly once.
        case async(UnsafeContinuation<Void, any Error>)
        case blocking(id: Int)
    }
    var wait: Wait
    var level: Durability
    var kind: Kind
}

/// Counters behind ``LogStats``. Guarded by the log's lock.
struct LogCounters {
    var appendedRecords: UInt64 = 0
    var appendedBytes: UInt64 = 0
    var blocksWritten: UInt64 = 0
    var storedBytes: UInt64 = 0
    var rawBytes: UInt64 = 0
    var fsyncs: UInt64 = 0
    var segmentsRolled: UInt64 = 0
    var droppedRecords: UInt64 = 0
    var droppedSegments: UInt64 = 0
    var expiredRecords: UInt64 = 0
    var retainedSegmentsDeleted: UInt64 = 0
    var writeErrors: UInt64 = 0
}

/// Everything appenders, the writer thread, readers and consumers share; guarded by `EventLog.lock`.
struct LogState {
    var status: LogStatus = .open
    /// The seq the next append gets.
    var nextSeq: UInt64
    /// The block being filled by appends.
    var current = PendingBlock()
    /// Blocks filled (or lingered out) and waiting for the writer, oldest first.
    var full: [PendingBlock] = []
    /// An empty array kept for its capacity: `full` while a batch is being written, then the
    /// written batch's (see `EventLog.writeFullBlocks`).
    var idleFull: [PendingBlock] = []
    /// Emptied blocks whose buffers are reused (no allocation on the append path once warm).
    var spare: [PendingBlock] = []
    /// Framed bytes appended and not yet written (current + full + being written).
    var pendingBytes = 0
    /// Every record below this seq is written to a segment file.
    var writtenEnd: UInt64
    /// Every record below this seq is durable (survives power loss).
    var syncedEnd: UInt64
    /// Callers waiting for their record to be written or synced. Change it only through
    /// ``addWaiter(_:)``, ``completeReachedWaiters()`` and ``removeAllWaiters()``, which keep
    /// ``syncedWaiters`` right.
    private(set) var waiters: [Waiter] = []
    /// How many of `waiters` wait for `.synced` (read on every synced append while gathering).
    private(set) var syncedWaiters = 0
    /// Waiters whose records reached their level, to be resumed outside the lock.
    var ready: [UnsafeContinuation<Void, any Error>] = []
    var blockingResults: [Int: Result<Void, SpoolError>] = [:]
    var nextBlockingID = 0
    /// Sealed segments then the active one (last), by base seq.
    var segments: [SegmentInfo]
    /// When the writer, stalled by a write error, tries again (monotonic ns).
    var retryAt: UInt64? = nil
    var writerExited = false
    /// `close()` was called (the status may still be `.failed`).
    var closeRequested = false
    /// Commits' retention deleting segments right now (see `EventLog.applyRetention`):
    /// `close()` waits for them before it releases the directory lock.
    var retentionsInFlight = 0
    /// ``EventLog/suspend()`` released the log's files and lock: appends are refused and no
    /// retention runs until ``EventLog/resume()``.
    var suspended = false
    /// ``EventLog/suspend()`` has released the files and the lock (it sets `suspended` first,
    /// then flushes, then releases): what `EventLog.isSuspended` reports.
    var released = false
    /// `close()` was called or the log is suspended: nothing may touch the log's files but
    /// what `close()`/`resume()` itself does.
    var filesReleased: Bool { closeRequested || suspended }
    /// No record waits to be sealed or written and no caller waits on one: what an idle
    /// suspension (`Configuration.suspendsWhenIdle`) asks before it runs.
    var hasNothingPending: Bool { current.isEmpty && full.isEmpty && waiters.isEmpty }
    /// An idle suspension (`Configuration.suspendsWhenIdle`) is queued and has not run.
    var idleSuspendQueued = false
    /// A retention run is queued on the retention queue and has not started.
    var retentionQueued = false
    /// `close()` finished releasing the files and the directory lock (other callers of
    /// `close()` wait for it).
    var closeFinished = false
    /// Someone holds the write token and is writing outside the lock: the writer thread or a
    /// blocking caller (`EventLog.leadWrite`). Only the holder touches the `SegmentWriter`.
    var writing = false
    /// The writer thread sleeps until the write token is released (a blocking caller holds it).
    var writerAwaitsToken = false
    /// Group-commit gathering after an fdatasync: wait (until `deadline`, monotonic ns) for
    /// `target` synced callers before the next one. See `EventLog.writerLoop`.
    var gather: (target: Int, deadline: UInt64)? = nil
    var counters = LogCounters()
    /// Write observers by registration number (``EventLog/observeWrites(_:)``), in order.
    var observers: [(id: UInt64, handler: @Sendable (UInt64) -> Void)] = []
    var nextObserverID: UInt64 = 0
    /// The committed offset (next seq to deliver) of every consumer, by name. Change it only
    /// through ``registerConsumer(_:at:)``, ``forgetConsumer(_:)`` and ``recordCommit(of:at:)``.
    private(set) var consumerOffsets: [String: UInt64] = [:]

    /// The full blocks, for the writer to write: `full` becomes the idle array (empty, with
    /// capacity) so blocks sealed meanwhile need no allocation. The writer hands the batch's
    /// array back, emptied, as the next idle one.
    mutating func takeFullBlocks() -> [PendingBlock] {
        let batch = full
        full = idleFull
        idleFull = []
        return batch
    }

    mutating func addWaiter(_ waiter: Waiter) {
        waiters.append(waiter)
        if waiter.level == .synced { syncedWaiters += 1 }
    }

    /// Moves the async waiters whose records reached their level to `ready` and records the
    /// blocking ones' success; the others stay, in order. The list keeps its capacity, so the
    /// next group's waiters are added without allocating.
    mutating func completeReachedWaiters() {
        var kept = 0
        var keptSynced = 0
        for index in waiters.indices {
            let waiter = waiters[index]
            if waiter.wait.end <= mark(for: waiter.level) {
                switch waiter.kind {
                case .async(let continuation): ready.append(continuation)
                case .blocking(let id): blockingResults[id] = .success(())
                }
            } else {
                waiters[kept] = waiter
                kept += 1
                if waiter.level == .synced { keptSynced += 1 }
            }
        }
        waiters.removeLast(waiters.count - kept)
        syncedWaiters = keptSynced
    }

    /// Records a segment's current size, adding it if it is new (by base seq).
    mutating func noteSegment(_ segment: SegmentInfo) {
        if let index = segments.lastIndex(where: { $0.baseSeq == segment.baseSeq }) {
            segments[index].size = segment.size
        } else {
            segments.append(segment)
        }
    }

    /// Notes a consumer being made at `seq`, before its offset file exists, so that retention
    /// keeps what it starts at. Returns `seq`.
    mutating func registerConsumer(_ name: String, at seq: UInt64) -> UInt64 {
        consumerOffsets[name] = seq
        return seq
    }

    /// Forgets a consumer whose offset file could not be made.
    mutating func forgetConsumer(_ name: String) {
        consumerOffsets.removeValue(forKey: name)
    }

    /// Records consumer `name`'s committed offset: a durable commit in this process, the offset
    /// a committer read at open, or one a committer in another process wrote in its file.
    mutating func recordCommit(of name: String, at next: UInt64) {
        consumerOffsets[name] = next
    }

    /// The lowest committed offset of every consumer, or nil when the log has none: retention
    /// keeps every record at or past it.
    var retentionFloor: UInt64? { consumerOffsets.values.min() }

    /// Takes the sealed segments among `doomed` out of the list (never the active one), before
    /// they are unlinked: a reader that finds a listed file missing then knows it was removed
    /// outside Spool. Returns those taken out.
    mutating func forgetSegments(_ doomed: [SegmentInfo]) -> [SegmentInfo] {
        let active = segments.last?.baseSeq
        let bases = Set(doomed.map(\.baseSeq))
        let forgotten = segments.filter { bases.contains($0.baseSeq) && $0.baseSeq != active }
        segments.removeAll { bases.contains($0.baseSeq) && $0.baseSeq != active }
        return forgotten
    }

    /// Lists again, in seq order, segments ``forgetSegments(_:)`` took out that could not be unlinked.
    mutating func relistSegments(_ kept: [SegmentInfo]) {
        for segment in kept {
            let index = segments.firstIndex { $0.baseSeq > segment.baseSeq } ?? segments.endIndex
            segments.insert(segment, at: index)
        }
    }

    /// The end of the records at `level`: ``writtenEnd`` or ``syncedEnd``.
    func mark(for level: Durability) -> UInt64 { level == .synced ? syncedEnd : writtenEnd }

    /// Forgets every waiter (each has been resumed or given its result), keeping the capacity.
    mutating func removeAllWaiters() {
        waiters.removeAll(keepingCapacity: true)
        syncedWaiters = 0
    }

    /// Whether a new waiter at `level` should wake the writer. While the writer gathers
    /// synced callers after an fdatasync, it sleeps until the group is complete (or its
    /// deadline passes): waking it for every arrival costs a context switch each, which on a
    /// 2-core machine is most of a group-commit cycle.
    func shouldWakeWriter(for level: Durability) -> Bool {
        guard level == .synced, let gather else { return true }
        return syncedWaiters >= gather.target
    }

    /// Bytes of every segment file (valid part); records pending in memory are not in it.
    var diskBytes: Int64 { segments.reduce(0) { $0 + $1.size } }
    /// The seq of the oldest record still stored.
    var firstSeq: UInt64 { segments.first?.baseSeq ?? nextSeq }

    var error: SpoolError? {
        switch status {
        case .stalled(let error): return error
        case .failed(let error):
            // Not the fsync's own code: `diskFull` would promise that appending works again
            // once space returns, and a failed fsync is never retried.
            return SpoolError(.failed, "an fdatasync failed (\(error.message)); the log refuses writes until it is reopened",
                              path: error.path, errno: error.errno)
        case .closing, .closed: return SpoolError(.closed, "the log is closed")
        case .open where suspended:
            return SpoolError(.suspended, "the log is suspended (it holds no lock and no file); call resume() before appending")
        case .open: return nil
        }
    }
}
