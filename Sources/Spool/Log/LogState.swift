/// Counters behind ``LogStats``. Guarded by the log's lock.
struct LogCounters {
    var appendedRecords: UInt64 = 0
    var appendedBytes: UInt64 = 0
    var blocksWritten: UInt64 = 0
    var blocksSealedInParallel: UInt64 = 0
    var blocksWrittenDuringSync: UInt64 = 0
    var storedBytes: UInt64 = 0
    var rawBytes: UInt64 = 0
    var fsyncs: UInt64 = 0
    var segmentsRolled: UInt64 = 0
    var droppedRecords: UInt64 = 0
    var droppedSegments: UInt64 = 0
    var expiredRecords: UInt64 = 0
    var retainedSegmentsDeleted: UInt64 = 0
    var writeErrors: UInt64 = 0
    var segmentsRecompressed: UInt64 = 0
    var bytesSavedByRecompression: UInt64 = 0
}

/// How a write of a batch ended, for the log to say so (``LogState/finishWrite(_:batch:activeSegment:syncFailed:now:)``).
enum WriteVerdict {
    /// Every block was written (and synced, when asked).
    case written
    /// Written after a stall: writing works again.
    case recovered
    /// A write failed: the blocks stay queued and the writer retries; appends are refused.
    case stalled(SpoolError)
    /// An `fdatasync` failed: writes are refused until reopen.
    case failed(SpoolError)
    /// A write failed while closing: the unwritten records are given up (close reports them).
    case lostWhileClosing(SpoolError)
}

/// Everything appenders, the writer thread, readers and consumers share; guarded by
/// `EventLog.lock`.
///
/// Every field is read freely under the lock but written only by this type's own operations,
/// each of which keeps the fields consistent with one another: the writer, suspension,
/// retention and the cap say what happened and the state decides what follows. Pure: no
/// I/O, no clock (times arrive as arguments), no lock of its own.
struct LogState {
    private(set) var status: LogStatus = .open {
        // A status that lets go of the files or fails the log stops a rewrite in flight.
        didSet { if !status.rewritesAllowed { table.cancelRewrite() } }
    }
    /// The seq the next append gets.
    private(set) var nextSeq: UInt64
    /// The records appended and not yet written: the block appends fill, the full ones
    /// waiting for the writer, and the buffers kept for reuse.
    private(set) var pending: PendingBlocks
    /// The end (exclusive) of the written records: every record below it is in a segment file.
    private(set) var writtenEnd: UInt64
    /// The end (exclusive) of the durable records (they survive power loss).
    private(set) var syncedEnd: UInt64
    /// Callers waiting for records to be written or synced, and what is owed to those whose
    /// wait ended.
    private(set) var waiters = Waiters()
    /// The segment files, consumers' offsets, retention runs and the cold rewrite in flight.
    private(set) var table: SegmentTable
    /// When the writer, stalled by a write error, tries again (monotonic ns).
    private(set) var retryAt: UInt64? = nil
    /// An idle suspension (`Configuration.suspendsWhenIdle`) is queued and has not run.
    private var idleSuspendQueued = false
    /// Group commit's tokens (who writes, who syncs), the writing threads' waits and exits,
    /// and the gathering after a sync.
    private(set) var group = GroupCommit()
    private(set) var counters = LogCounters()
    /// Write observers by registration number (``EventLog/observeWrites(_:)``), in order.
    private(set) var observers: [(id: UInt64, handler: @Sendable (UInt64) -> Void)] = []
    private var nextObserverID: UInt64 = 0

    /// How long a block with no waiter lingers before the writer seals it, in ns
    /// (``Configuration/linger``).
    let linger: UInt64

    init(nextSeq: UInt64, segments: [SegmentInfo], blockSize: Int, linger: UInt64) {
        self.pending = PendingBlocks(blockSize: blockSize)
        self.linger = linger
        self.nextSeq = nextSeq
        self.writtenEnd = nextSeq
        self.syncedEnd = nextSeq
        self.table = SegmentTable(segments: segments)
    }

    /// How many of ``waiters`` wait for `.synced`. (Callers outside read `state.table.…` and
    /// `state.waiters.…` directly: a path of stored properties, where a computed property of the
    /// log's stored state may copy all of it, see ``addWaiter(_:)``.)
    private var syncedWaiters: Int { waiters.synced }

    /// No record waits to be sealed or written and no caller waits on one: what an idle
    /// suspension (`Configuration.suspendsWhenIdle`) asks before it runs.
    var hasNothingPending: Bool { pending.isEmpty && waiters.isEmpty }
    /// Some caller waits for a record not yet written (not only for a sync of written ones):
    /// the pipeline thread seals the current block for it.
    var waitsForUnwritten: Bool { waiters.contains { $0.wait.end > writtenEnd } }

    // MARK: Appends

    /// Gives the record the next seq and copies it into the current block, sealing blocks as
    /// they fill: a record that would take the current block past the format's bound on a
    /// block's raw length starts a new one, and a block reaching `blockSize` is sealed.
    /// Returns its seq, whether the writer should be woken (a block was sealed, or one was
    /// started while no group gathers: the writer starts the linger clock), and the block this
    /// record filled, if it did (sealed, now in the writer's queue; its bytes are shared).
    /// `now` (monotonic ns) is read only when the record starts a block (its linger clock): the
    /// append path reads no clock otherwise.
    mutating func append(_ payload: UnsafeRawBufferPointer, timestamp: Int64, now: @autoclosure () -> UInt64) -> (seq: UInt64, wake: Bool, filled: PendingBlock?) {
        let seq = nextSeq
        nextSeq += 1
        let added = pending.add(payload, timestamp: timestamp, seq: seq, now: now())
        counters.appendedRecords += 1
        counters.appendedBytes += UInt64(payload.count)
        return (seq, added.sealed || (added.started && group.gather == nil), added.filled)
    }

    /// Moves the current block to the writer's queue and starts a new one from a spare buffer.
    mutating func sealCurrentBlock() { pending.seal(nextSeq: nextSeq) }

    // MARK: Waiters

    /// Adds a waiter; returns whether it should wake the writer (``shouldWakeWriter(for:)``).
    ///
    /// The answer comes from here, a mutating call, because asking ``shouldWakeWriter(for:)``
    /// of the log's stored state from `EventLog` copies the whole state (449 bytes and a
    /// retain and release of every buffer it holds), even inlined: on every durable append.
    @discardableResult
    mutating func addWaiter(_ waiter: Waiter) -> Bool {
        waiters.add(waiter)
        return shouldWakeWriter(for: waiter.level)
    }

    /// Adds a blocking caller's waiter; its result is collected with ``takeBlockingResult(_:)``.
    mutating func addBlockingWaiter(_ wait: Wait, level: Durability) -> Int {
        waiters.addBlocking(wait, level: level)
    }

    /// The result of blocking waiter `id`, once it has one (taken: asked once).
    mutating func takeBlockingResult(_ id: Int) -> Result<Void, SpoolError>? {
        waiters.takeBlockingResult(id)
    }

    /// Moves the async waiters whose records reached their level to the ready list (see
    /// ``takeReady(_:)``) and records the blocking ones' success; the others stay, in order.
    private mutating func completeReachedWaiters() {
        waiters.completeReached(writtenEnd: writtenEnd, syncedEnd: syncedEnd)
    }

    /// Swaps the ready continuations with `buffer` (``Waiters/takeReady(_:)``).
    mutating func takeReady(_ buffer: inout [UnsafeContinuation<Void, any Error>]) {
        waiters.takeReady(&buffer)
    }

    /// Takes back an emptied buffer from ``takeReady(_:)`` (``Waiters/returnReadyBuffer(_:)``).
    mutating func returnReadyBuffer(_ buffer: inout [UnsafeContinuation<Void, any Error>]) {
        waiters.returnReadyBuffer(&buffer)
    }

    /// Some async waiter's wait ended and it is not resumed yet.
    var hasReady: Bool { waiters.hasReady }

    /// Completes the waiters whose records reached their level, and fails every other one with
    /// `explicit` or the log's error (blocking ones get their result; async ones are returned,
    /// with the ready ones, to be resumed by the caller).
    mutating func failPendingWaiters(with explicit: SpoolError? = nil) -> (ready: [UnsafeContinuation<Void, any Error>], failed: [(UnsafeContinuation<Void, any Error>, SpoolError)]) {
        guard !waiters.isEmpty else { return ([], []) }
        let error = explicit ?? status.error ?? SpoolError(.closed, "the log is closed")
        return waiters.failPending(with: error, writtenEnd: writtenEnd, syncedEnd: syncedEnd)
    }

    /// The end of the records at `level`: ``writtenEnd`` or ``syncedEnd``.
    func mark(for level: Durability) -> UInt64 { level == .synced ? syncedEnd : writtenEnd }

    /// Whether a new waiter at `level` should wake the writer. While the writer gathers
    /// synced callers after an fdatasync, it sleeps until the group is complete (or its
    /// deadline passes): waking it for every arrival costs a context switch each, which on a
    /// 2-core machine is most of a group-commit cycle.
    func shouldWakeWriter(for level: Durability) -> Bool {
        group.shouldWakeWriter(for: level, syncedWaiters: syncedWaiters)
    }

    // MARK: Writing

    /// The writer thread's next step at `now` (monotonic ns), the whole of its policy: wait
    /// for the token another thread holds; fail the waiters of a failed log; wait for a stalled
    /// write's retry; gather a group; let the current block linger; write; sync what is written;
    /// sleep; or exit. Ends a gathering that no longer holds (``endGather(at:)``) and seals a
    /// current block that must be written. `EventLog.writerLoop` executes what it returns, and
    /// `LogLifecycleSimulation` drives it.
    ///
    /// Group commit, gathering: the callers an fdatasync just served append again within
    /// microseconds. Without waiting for them, syncs alternate between two half-groups; waiting
    /// (at most one write-and-sync's duration) until as many synced callers are back as the
    /// last sync saw lets one fdatasync cover all of them. Only synced callers gather: a
    /// `written` waiter ends it, and so does `close()`. Arrivals do not wake the writer until the
    /// group is complete (``shouldWakeWriter(for:)``).
    mutating func nextWriterStep(now: UInt64) -> WriterStep {
        // Someone else writes, or a blocking caller's sync runs (the writer must not roll the
        // file it syncs): whoever it is wakes the writer when done.
        if group.writerLooks() { return .awaitToken }
        switch status {
        case .closed:
            return .exit
        case .failed(_, let closing):
            // Nothing can be trusted until reopen: write nothing more, and exit once closing
            // (close() reports what was not written).
            return closing ? .exit : .failWaiters
        case .stalled:
            if let retryAt, retryAt > now { return .retry(at: retryAt) }
        case .open, .suspending, .suspended, .closing:
            break
        }
        let closing = status.isClosing
        if !closing, let gather = group.gather, now < gather.deadline, syncedWaiters < gather.target, waiters.count == syncedWaiters {
            return .gather(until: gather.deadline)
        }
        endGather(at: now)
        if !pending.current.isEmpty {
            let deadline = pending.current.openedAt &+ linger
            if closing || !waiters.isEmpty || now >= deadline {
                sealCurrentBlock()
            } else if pending.full.isEmpty {
                return .linger(until: deadline)
            }
        }
        if let work = pendingWork() { return .work(work) }
        return closing ? .exit : .idle
    }

    /// What a blocking caller waiting for its record does at `now` (monotonic ns): when the log
    /// takes writes, no one holds a token and no gathering holds, it seals the current block and
    /// writes it, or syncs what is written, itself: its own record is then written without two
    /// thread hand-offs. Nil: it waits for the writer.
    mutating func nextLeaderWork(now: @autoclosure () -> UInt64) -> WriterWork? {
        guard status.acceptsWrites, group.isIdle, !group.gathers(at: now()) else { return nil }
        sealCurrentBlock()
        return pendingWork()
    }

    /// What the pipeline thread does while the writer is in an `fdatasync`
    /// (``pipelineCanWrite``): it seals the current block when some caller waits for it, and
    /// writes the full blocks into the page cache. `sync` says a synced caller waits (the write
    /// preallocates for the sync to come); none runs beside the one in flight. Nil: it sleeps.
    mutating func nextPipelineWork() -> WriterWork? {
        guard pipelineCanWrite else { return nil }
        if waitsForUnwritten { sealCurrentBlock() }
        return .write(sync: syncedWaiters > 0)
    }

    /// Full blocks to write (synced when a synced caller waits), else written records a synced
    /// caller waits for to sync; nil when neither.
    private func pendingWork() -> WriterWork? {
        let wantsSync = syncedWaiters > 0
        if !pending.full.isEmpty { return .write(sync: wantsSync) }
        if wantsSync && writtenEnd > syncedEnd { return .sync }
        return nil
    }

    /// Ends a group-commit gathering window at `now` (``GroupCommit/endGather(at:syncedWaiters:)``).
    mutating func endGather(at now: UInt64) { group.endGather(at: now, syncedWaiters: syncedWaiters) }

    /// The writer thread has exited: nobody is left to complete a new waiter.
    mutating func writerDidExit() { group.writerDidExit() }

    /// The pipeline thread has exited.
    mutating func pipelineDidExit() { group.pipelineDidExit() }

    /// Whether the pipeline thread may write now: the writer is in an `fdatasync`, no one holds
    /// the write token, the log takes writes, no earlier write stopped at a roll, and there is
    /// a full block, or a current one some caller waits for.
    var pipelineCanWrite: Bool {
        guard group.syncTarget != nil, !group.writing, !group.pipelineBlocked, status.acceptsWrites else { return false }
        return !pending.full.isEmpty || (!pending.current.isEmpty && waitsForUnwritten)
    }

    /// Takes the write token and the full blocks for the writer to write
    /// (``PendingBlocks/takeFull()``; the batch's array comes back in
    /// ``finishWrite(_:batch:activeSegment:syncFailed:now:)``). Returns the batch and how many
    /// synced callers it serves.
    mutating func beginWrite() -> (batch: [PendingBlock], served: Int) {
        group.beginWrite()
        return (pending.takeFull(), syncedWaiters)
    }

    /// Applies what writing `batch` achieved, releases the write token, recycles the written
    /// blocks' buffers and completes the waiters it reached. `batch` is emptied and kept (for
    /// its capacity) as the next idle array. Returns what the log should say of it.
    mutating func finishWrite(_ outcome: SegmentWriter.Outcome, batch: inout [PendingBlock], activeSegment: SegmentInfo?,
                              syncFailed: Bool, now: UInt64) -> WriteVerdict {
        let writeDuringSync = group.finishWrite()
        table.activeWriteFinished()
        let failedBefore = status.isFailed
        if outcome.blocksWritten > 0 {
            let last = outcome.blocksWritten - 1
            writtenEnd = batch[last].firstSeq + UInt64(batch[last].count)
        }
        let stoppedShort = outcome.blocksWritten < batch.count
        counters.blocksWritten += UInt64(outcome.blocksWritten)
        counters.blocksSealedInParallel += UInt64(outcome.sealedInParallel)
        if writeDuringSync { counters.blocksWrittenDuringSync += UInt64(outcome.blocksWritten) }
        counters.storedBytes += UInt64(outcome.storedBytes)
        counters.rawBytes += UInt64(outcome.rawBytes)
        counters.fsyncs += UInt64(outcome.fsyncs)
        // Segments sealed and created were noted as the batch rolled (the cap may since have
        // dropped some of them); the active one gets its current size.
        if let activeSegment { table.noteSegment(activeSegment) }
        counters.segmentsRolled += UInt64(outcome.sealed.count)
        // The written blocks' buffers are kept; unwritten ones go back to the queue's front.
        pending.wrote(outcome.blocksWritten, of: &batch)
        var verdict = WriteVerdict.written
        if failedBefore {
            // The sync in flight failed while this write ran (the pipeline): the log stays
            // failed, whatever the write did; the writer fails every waiter.
        } else if let error = outcome.error {
            counters.writeErrors += 1
            if syncFailed {
                status = .failed(error, closing: status.closeRequested)
                verdict = .failed(error)
            } else if status.isClosing {
                // Closing: no more retries; close() reports how many records were not written.
                pending.discardAll(nextSeq: nextSeq)
                verdict = .lostWhileClosing(error)
            } else {
                let previous = retryAt != nil
                status = .stalled(error)
                retryAt = now + (previous ? 1_000_000_000 : 100_000_000)
                verdict = .stalled(error)
            }
        } else {
            // A write during a sync stopped at a roll: the rest waits for the sync's end.
            if stoppedShort { group.writeStoppedAtRoll() }
            if case .stalled = status {
                status = .open
                retryAt = nil
                verdict = .recovered
            }
        }
        if !failedBefore, case .written = verdict { completeReachedWaiters() }
        if case .recovered = verdict { completeReachedWaiters() }
        return verdict
    }

    /// After a synced write that served `served` synced callers: wait (at most as long as
    /// that write took, and no longer than ``GroupCommit/gatherLimit``) for as many synced callers as
    /// are back to form the next group, on top of those already waiting.
    mutating func startGather(served: Int, started: UInt64, finished: UInt64) {
        group.startGather(served: served, started: started, finished: finished, waiting: syncedWaiters)
    }

    /// Takes the sync token for an `fdatasync` of what is written, once no one holds the write
    /// token (the writer calls it in the same step as the write it follows, or with nothing to
    /// write): returns the end it will make durable. The write token stays free: the pipeline
    /// thread may write the next group while the sync runs (``pipelineCanWrite``).
    mutating func beginSync() -> UInt64 {
        group.beginSync(upTo: writtenEnd)
        return writtenEnd
    }

    /// Releases the sync token after the `fdatasync` ``beginSync()`` started: every record below
    /// its target is durable, or, on a failure, the log fails until reopen (with every waiter
    /// not yet answered: those of this group and of any written after it; the ones an earlier
    /// sync served were answered then). Returns the failure's verdict, or `.written`.
    mutating func finishSync(upTo target: UInt64, failure: SpoolError?) -> WriteVerdict {
        group.finishSync(upTo: target)
        counters.fsyncs += 1
        if let failure {
            status = .failed(failure, closing: status.closeRequested)
            return .failed(failure)
        }
        syncedEnd = max(syncedEnd, target)
        completeReachedWaiters()
        return .written
    }

    /// Takes the write token for `suspend()`/`resume()`, once no one writes (and, when asked,
    /// no retention deletes): false if the caller must wait for progress first.
    mutating func takeWriteToken(waitingForRetention: Bool) -> Bool {
        guard !(waitingForRetention && (table.retentionsInFlight > 0 || table.rewrite != nil)) else { return false }
        return group.takeToken()
    }

    /// Releases the token ``takeWriteToken(waitingForRetention:)`` took; `resuming`: the log
    /// is resumed (appends are taken again).
    mutating func releaseWriteToken(resuming: Bool) {
        group.releaseToken()
        if resuming, case .suspended = status { status = .open }
    }

    // MARK: Lifecycle

    /// `close()`: whether this call closes (false: another call did or does, and this one
    /// waits for ``status.closeFinished``). The writer writes what is pending, then exits.
    mutating func requestClose() -> Bool {
        switch status {
        case .closing, .closed, .failed(_, closing: true):
            return false
        case .failed(let error, closing: false):
            status = .failed(error, closing: true)  // a failed log stays failed: the writer exits without writing more
        case .stalled:
            retryAt = 0  // one last try
            status = .closing
        case .open, .suspending, .suspended:
            status = .closing
        }
        return true
    }

    /// Once the writer exited and no retention deletes: the log is closed. Returns the
    /// records appended and never written.
    mutating func finishClosing() -> Range<UInt64> {
        status = .closed(finished: false)
        return writtenEnd..<nextSeq
    }

    /// `close()` released the files and the directory lock.
    mutating func markCloseFinished() { status = .closed(finished: true) }

    /// `suspend()`: refuses appends from now on and returns the end of what must be made
    /// durable before the files are let go; nil when already suspended. With `onlyIfIdle`, the
    /// queued idle suspension (``queueIdleSuspension()``) runs: it is no longer queued, and it
    /// begins only if nothing is pending, checked in this same step (an append between a check
    /// and the start would be flushed and the lock let go at once).
    /// - Throws: the log's error (a suspended log would hide it).
    mutating func beginSuspend(onlyIfIdle: Bool = false) throws -> UInt64? {
        if onlyIfIdle {
            idleSuspendQueued = false
            guard hasNothingPending else { return nil }
        }
        if status.suspendingOrSuspended { return nil }
        if let error = status.error { throw error }
        status = .suspending
        return nextSeq
    }

    /// The flush before suspending failed: the log is open again (or stays stalled or failed,
    /// as the failed write left it).
    mutating func abandonSuspend() {
        if case .suspending = status { status = .open }
    }

    /// `suspend()` let go of the files and the lock.
    mutating func markReleased() {
        assert({ if case .suspending = status { true } else { false } }(), "only a suspending log is released")
        status = .suspended
    }

    /// `Configuration.suspendsWhenIdle`: whether to queue an idle suspension now (the writer
    /// found nothing to do); at most one is queued.
    mutating func queueIdleSuspension() -> Bool {
        guard !idleSuspendQueued, case .open = status, hasNothingPending else { return false }
        idleSuspendQueued = true
        return true
    }

    // MARK: Segments, retention and the cap

    /// Records a segment's current size, adding it if it is new (by base seq).
    mutating func noteSegment(_ segment: SegmentInfo) { table.noteSegment(segment) }

    /// Notes a consumer being made at `seq`, before its offset file exists, so that retention
    /// keeps what it starts at. Returns `seq`.
    mutating func registerConsumer(_ name: String, at seq: UInt64) -> UInt64 {
        table.recordOffset(of: name, at: seq)
        return seq
    }

    /// Forgets a consumer whose offset file could not be made.
    mutating func forgetConsumer(_ name: String) { table.forgetConsumer(name) }

    /// Records consumer `name`'s committed offset: a durable commit in this process, the offset
    /// a committer read at open, or one a committer in another process wrote in its file.
    mutating func recordCommit(of name: String, at next: UInt64) { table.recordOffset(of: name, at: next) }

    /// Whether to queue a retention run after a roll: at most one is queued, and none once
    /// the files are released.
    mutating func queueRetention() -> Bool { table.queueRetention(allowed: !status.filesReleased) }

    /// The queued retention run starts.
    mutating func retentionDequeued() { table.retentionDequeued() }

    /// Starts a retention run: the sealed segments every consumer has passed (none once the
    /// files are released), counted in flight until ``finishRetention(deleted:)`` when any.
    mutating func beginRetention() -> [SegmentInfo] { table.beginRetention(allowed: !status.filesReleased) }

    /// A retention run that ``beginRetention()`` started (with segments) deleted `deleted`.
    mutating func finishRetention(deleted: Int) {
        counters.retainedSegmentsDeleted += UInt64(deleted)
        table.finishRetention()
    }

    // MARK: Cold recompression

    /// Starts rewriting the sealed segment at `baseSeq` (cold recompression): the segment as
    /// listed and the flag raised when the rewrite must stop; nil when another rewrite runs,
    /// the files are let go, or the segment is not a listed sealed one of that size (retention
    /// or the cap took it).
    mutating func beginRewrite(of segment: SegmentInfo) -> (segment: SegmentInfo, stop: StopFlag)? {
        table.beginRewrite(of: segment, allowed: status.rewritesAllowed)
    }

    /// Whether the rewrite in flight may go on: not stopped, and the files are still held.
    var rewriteMayContinue: Bool { table.rewriteUnstopped && status.rewritesAllowed }


    /// The writer made room under the cap for a write that leaves the active segment at `size`.
    mutating func noteActiveSizeBeingWritten(_ size: Int64) { table.noteActiveSizeBeingWritten(size) }

    /// The rewrite's temporary file is about to hold `bytes` (the cap made room for them).
    mutating func noteRewriteWritten(_ bytes: Int64) { table.noteRewriteWritten(bytes) }

    /// The cap is about to drop the segment being rewritten (or needs the room): the rewrite
    /// replaces nothing and its reservation no longer counts.
    mutating func cancelRewrite() { table.cancelRewrite() }

    /// Ends the rewrite in flight. With `replacedBy`, the new file took the segment's name
    /// (under the segment-files lock, while the segment was listed): the list takes its size,
    /// and the counters the rewrite and the bytes it saved.
    mutating func finishRewrite(replacedBy size: Int64?) {
        if let saved = table.finishRewrite(replacedBy: size) {
            counters.segmentsRecompressed += 1
            counters.bytesSavedByRecompression += UInt64(saved)
        }
    }

    /// The cap dropped `segments` segments holding `records` records no consumer had read.
    mutating func countDropped(records: UInt64, segments: Int) {
        counters.droppedRecords += records
        counters.droppedSegments += UInt64(segments)
    }

    /// A read met `count` expired records for the first time.
    mutating func countExpired(_ count: UInt64) { counters.expiredRecords += count }

    /// Takes the sealed segments among `doomed` out of the list (``SegmentTable/forgetSegments(_:)``);
    /// returns those taken out.
    mutating func forgetSegments(_ doomed: [SegmentInfo]) -> [SegmentInfo] { table.forgetSegments(doomed) }

    /// Lists again, in seq order, segments ``forgetSegments(_:)`` took out that could not be unlinked.
    mutating func relistSegments(_ kept: [SegmentInfo]) { table.relistSegments(kept) }

    // MARK: Observers

    /// Registers a write observer; returns its registration number.
    mutating func addObserver(_ handler: @escaping @Sendable (UInt64) -> Void) -> UInt64 {
        let id = nextObserverID
        nextObserverID += 1
        observers.append((id, handler))
        return id
    }

    mutating func removeObserver(_ id: UInt64) {
        observers.removeAll { $0.id == id }
    }

    // MARK: Reading

    /// The seq of the oldest record still stored.
    var firstSeq: UInt64 { table.segments.first?.baseSeq ?? nextSeq }

}
