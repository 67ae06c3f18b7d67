/// A group-commit gathering window after an fdatasync (``GroupCommit/gather``): the writer
/// waits until `target` synced callers wait, or until `deadline`.
struct Gathering: Equatable {
    /// Monotonic ns: the gathering gives up then and the writer writes what it has.
    let deadline: UInt64
    /// Monotonic ns: when the sync ended and the gathering began.
    let began: UInt64
    /// The write and sync before it, in ns: the longest any gathering waits.
    let cycle: UInt64
    /// The synced callers that sync served: those the gathering waits to come back.
    let served: Int
    /// Synced callers already waiting when it began (they arrived during the sync).
    let waitingAtStart: Int

    /// Synced waiters that complete the group: the sync's callers back, on top of those
    /// already waiting when it began.
    var target: Int { served + waitingAtStart }
    /// How long it may wait, in ns: the write and sync before it, or less (``GroupCommit/gatherLimit``).
    var window: UInt64 { deadline - began }
}

/// Group commit's tokens and gathering: who writes (the write token), whether an `fdatasync`
/// runs and up to where (the sync token), whether the writer thread waits for a token, whether
/// the writing threads are gone, and the gathering window after a sync.
///
/// Part of ``LogState``, guarded by `EventLog.lock`: its fields are read freely and written
/// only by its own operations, which ``LogState`` calls as writes and syncs begin and end. Pure:
/// no I/O, no clock (times arrive as arguments).
struct GroupCommit {
    /// Someone holds the write token and is writing outside the lock: the writer thread, the
    /// pipeline thread (while the writer is in an `fdatasync`), a blocking caller
    /// (`EventLog.leadWrite`) or `suspend()`/`resume()`. Only the holder touches the
    /// `SegmentWriter`'s state.
    private(set) var writing = false
    /// The end (exclusive) of what the `fdatasync` in flight makes durable: the writer thread
    /// holds the sync token (at most one sync runs) and has let go of the write token, so the
    /// pipeline thread may write the next group into the page cache meanwhile (never rolling a
    /// segment: the sync holds the active one's descriptor). Nil when no sync runs.
    private(set) var syncTarget: UInt64? = nil
    /// A write during the sync in flight stopped before a block that needs a new segment: the
    /// pipeline thread writes nothing more until the sync ends, and the writer rolls after it.
    private(set) var pipelineBlocked = false
    /// The write in progress began while a sync ran (counted in `blocksWrittenDuringSync`).
    private var writeDuringSync = false
    /// The writer thread's last step was ``WriterStep/awaitToken``: it sleeps until the holder of
    /// the write or sync token wakes it.
    private(set) var writerAwaitsToken = false
    /// The writer thread has exited: nobody is left to complete a new waiter.
    private(set) var writerExited = false
    /// The pipeline thread has exited (``EventLog/pipelineLoop()``).
    private(set) var pipelineExited = false
    /// Group-commit gathering after an fdatasync: wait (until `deadline`, monotonic ns) for
    /// `target` synced callers before the next one. See ``LogState/nextWriterStep(now:)``.
    private(set) var gather: Gathering? = nil
    /// The longest the next gathering may wait (ns): a whole write-and-sync (`.max`) while
    /// gatherings find their callers coming back in a burst, halved (down to an eighth of one)
    /// each time a gathering finds arrivals no faster than a steady stream, doubled by each
    /// burst. See ``endGather(at:syncedWaiters:)``.
    private(set) var gatherLimit: UInt64 = .max

    /// No one holds the write token and no sync runs.
    var isIdle: Bool { !writing && syncTarget == nil }

    // MARK: Tokens

    /// The writer thread looks for its next step: it awaits the token while another thread
    /// holds the write or the sync token. Returns whether it does.
    mutating func writerLooks() -> Bool {
        writerAwaitsToken = !isIdle
        return writerAwaitsToken
    }

    /// Takes the write token to write a batch (during a sync, the pipeline's write).
    mutating func beginWrite() {
        precondition(!writing, "the write token is taken once")
        writing = true
        writeDuringSync = syncTarget != nil
    }

    /// Releases the write token after a batch; returns whether it was written during a sync.
    mutating func finishWrite() -> Bool {
        writing = false
        return writeDuringSync
    }

    /// A write during the sync in flight stopped before a block that needs a new segment: the
    /// pipeline writes nothing more until the sync ends.
    mutating func writeStoppedAtRoll() { pipelineBlocked = true }

    /// Takes the write token for `suspend()`/`resume()`: false while anyone writes or syncs.
    mutating func takeToken() -> Bool {
        guard isIdle else { return false }
        writing = true
        return true
    }

    /// Releases the token ``takeToken()`` took.
    mutating func releaseToken() { writing = false }

    /// Takes the sync token for an `fdatasync` making every record below `target` durable.
    mutating func beginSync(upTo target: UInt64) {
        precondition(isIdle, "one sync at a time, and none while someone writes")
        syncTarget = target
    }

    /// Releases the sync token of the sync to `target`: the pipeline may write past a roll again.
    mutating func finishSync(upTo target: UInt64) {
        precondition(syncTarget == target, "the sync that ends is the one in flight")
        syncTarget = nil
        pipelineBlocked = false
    }

    /// The writer thread has exited.
    mutating func writerDidExit() { writerExited = true }

    /// The pipeline thread has exited.
    mutating func pipelineDidExit() { pipelineExited = true }

    // MARK: Gathering

    /// Whether a gathering's deadline is still ahead at `now`: no blocking caller leads a write then.
    func gathers(at now: @autoclosure () -> UInt64) -> Bool {
        guard let gather else { return false }
        return now() < gather.deadline
    }

    /// Whether a new waiter at `level` should wake the writer, with `syncedWaiters` synced
    /// callers waiting (this one counted). While the writer gathers synced callers after an
    /// fdatasync, it sleeps until the group is complete (or its deadline passes): waking it for
    /// every arrival costs a context switch each, which on a 2-core machine is most of a
    /// group-commit cycle.
    func shouldWakeWriter(for level: Durability, syncedWaiters: Int) -> Bool {
        guard level == .synced, let gather else { return true }
        return syncedWaiters >= gather.target
    }

    /// After a synced write that served `served` synced callers, from `started` to `finished`
    /// (monotonic ns): wait (at most as long as that write took, and no longer than
    /// ``gatherLimit``) for as many synced callers as are back to form the next group, on top
    /// of the `waiting` ones.
    mutating func startGather(served: Int, started: UInt64, finished: UInt64, waiting: Int) {
        let cycle = finished &- started
        gather = Gathering(deadline: finished + min(cycle, gatherLimit), began: finished, cycle: cycle,
                           served: served, waitingAtStart: waiting)
    }

    /// Ends a group-commit gathering window at `now`, with `syncedWaiters` synced callers
    /// waiting, and learns from it how long the next may wait. A gathering that ended on its
    /// own terms (its group complete, or its deadline passed) is evidence: if synced callers
    /// arrived at least as fast as the sync's callers coming back within three quarters of a
    /// write-and-sync would (a closed loop: the callers the sync resumed append again within
    /// microseconds), the next may wait twice as long, up to a whole write-and-sync; if slower (a
    /// steady stream of new callers: waiting for as many as the sync served holds those already
    /// waiting for about a whole cycle, so groups and latencies grow), half as long, but never
    /// less than an eighth of a write-and-sync, so that a closed loop that starts later is still
    /// seen. Doubling rather than jumping back keeps a stream whose arrivals now and then bunch
    /// up (a scheduler running queued tasks together) from looking like a closed loop. One ended
    /// early (a `written` caller, a close) teaches nothing.
    mutating func endGather(at now: UInt64, syncedWaiters: Int) {
        guard let ended = gather else { return }
        gather = nil
        guard syncedWaiters >= ended.target || now >= ended.deadline else { return }
        let arrived = UInt64(max(0, syncedWaiters - ended.waitingAtStart))
        let elapsed = now > ended.began ? now - ended.began : 1  // a clock read before it began counts as 1 ns
        // arrived / elapsed >= served / (3/4 of a write-and-sync), without division.
        // (Wrapping products: the factors are counts of callers and ns of one cycle.)
        if arrived &* ended.cycle &* 3 >= UInt64(ended.served) &* elapsed &* 4 {
            gatherLimit = ended.window >= ended.cycle / 2 ? .max : ended.window * 2
        } else {
            gatherLimit = max(ended.cycle / 8, ended.window / 2)
        }
    }
}
