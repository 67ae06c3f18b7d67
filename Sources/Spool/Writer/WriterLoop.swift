extension EventLog {
    /// The dedicated writer thread: takes sealed (or lingered-out) blocks from the shared state,
    /// writes them outside the lock, syncs when a caller asked, then publishes the new
    /// watermarks and completes the waiters. Appends continue while it writes (group commit).
    ///
    /// Whoever writes holds the write token (`state.group.writing`): this thread, the pipeline thread
    /// (``pipelineLoop()``) while this one is in an `fdatasync`, or a blocking caller that found
    /// it idle and writes its own record (``leadWrite()``). Whoever syncs holds the sync token
    /// (`state.group.syncTarget`), and lets go of the write token first: the next group is compressed
    /// and written while the one before it syncs (a two-stage pipeline, as MySQL's binlog group
    /// commit flushes one group while the previous one syncs).
    ///
    /// What it does next is the state's decision (``LogState/nextWriterStep(now:)``: gathering,
    /// linger, retry, write or sync); this loop only executes it.
    func writerLoop() {
        lock.lock()
        loop: while true {
            switch state.nextWriterStep(now: monotonicNanos()) {
            case .awaitToken:
                lock.writerWait(until: nil)
            case .failWaiters:
                failPendingWaiters()
                lock.writerWait(until: nil)
            case .retry(let deadline), .gather(let deadline), .linger(let deadline):
                lock.writerWait(until: deadline)
            case .idle:
                scheduleIdleSuspensionIfIdle()
                lock.writerWait(until: nil)
            case .work(let work):
                perform(work, gathering: true)
            case .exit:
                break loop
            }
        }
        state.writerDidExit()
        lock.wakePipeline()  // it exits too
        failPendingWaiters()
        lock.broadcastProgress()
        lock.unlock()
    }

    /// The pipeline thread: while the writer thread (or a blocking caller) is in an
    /// `fdatasync`, it writes the blocks that arrive into the page cache, so that `written`
    /// callers are answered at once and the next group's sync starts as soon as this one ends,
    /// with its blocks already compressed and written. It never syncs and never rolls a segment
    /// (the sync holds the active file); it sleeps whenever no sync runs, and appends wake it
    /// instead of the writer while one does (``wakeForWork()``). Exits after the writer thread.
    func pipelineLoop() {
        lock.lock()
        while !state.group.writerExited {
            if let work = state.nextPipelineWork() {
                perform(work, gathering: false)
                if state.group.writerAwaitsToken { lock.wakeWriter() }
                continue
            }
            lock.pipelineWait()
        }
        state.pipelineDidExit()
        lock.broadcastProgress()
        lock.unlock()
    }

    /// Does the I/O the state chose (``WriterWork``). With `gathering` (the writer thread's), a
    /// sync that served synced callers starts a gathering window for the next group. Lock held
    /// on entry and exit; released while writing and syncing.
    private func perform(_ work: WriterWork, gathering: Bool) {
        switch work {
        case .write(let sync): writeFullBlocks(sync: sync, gathering: gathering)
        case .sync: runSync(writer.prepareSync(), served: 0, started: 0)
        }
    }

    /// Wakes whoever writes next: the pipeline thread while an `fdatasync` runs, else the
    /// writer thread. Lock held (the choice reads the state).
    @inline(__always)
    func wakeForWork() { wake(pipeline: state.group.syncTarget != nil) }

    /// Wakes the pipeline thread or the writer, as ``wakeForWork()`` chose under the lock; may
    /// be called once the lock is let go (both re-check the state before they wait).
    @inline(__always)
    func wake(pipeline: Bool) {
        if pipeline { lock.wakePipeline() } else { lock.wakeWriter() }
    }

    /// Writes the full blocks holding the write token, publishes the outcome, then, when `sync`
    /// and no sync is in flight, syncs them holding the sync token only (``runSync(_:served:started:)``).
    /// During another's sync (the pipeline thread) it writes without syncing and without rolling.
    /// With `gathering`, a sync that served synced callers starts a gathering window for the
    /// next group. Lock held on entry and exit; released while writing and syncing.
    func writeFullBlocks(sync: Bool, gathering: Bool) {
        let duringSync = state.group.syncTarget != nil
        // Taken, not copied: the batch then owns its blocks' buffers alone, so recycling them
        // (`publish`) allocates nothing, and it is handed back as the idle array below.
        var (batch, served) = state.beginWrite()
        lock.unlock()
        let started = monotonicNanos()
        let outcome = writeBatch(batch[...], preallocating: sync, mayRoll: !duringSync)
        let syncs = sync && !duringSync && outcome.error == nil
        let pendingSync = syncs ? writer.prepareSync() : nil
        lock.lock()
        publish(outcome, batch: &batch)
        if duringSync && outcome.blocksWritten > 0 { metrics.blocksWrittenDuringSync.increment(by: outcome.blocksWritten) }
        if syncs && !state.status.isFailed {
            runSync(pendingSync, served: gathering ? served : 0, started: started)
        } else {
            resumeReady()
            notifyObservers()
        }
    }

    /// Makes what is written durable, holding the sync token and not the write token (the
    /// pipeline thread may write meanwhile), then completes the waiters it served; with
    /// `served` synced callers, starts a gathering window for the next group. `pending` is
    /// the sync prepared under the write token (nil: no active segment, whose last roll already
    /// synced everything). Lock held on entry and exit; released while syncing.
    private func runSync(_ pending: SegmentWriter.PendingSync?, served: Int, started: UInt64) {
        let target = state.beginSync()
        assert(pending == nil || pending?.end == target, "the sync covers what is written")
        if state.pipelineCanWrite { lock.wakePipeline() }
        // The written callers of this write are answered before the sync, not after it.
        resumeReady()
        notifyObservers()
        lock.unlock()
        var failure: SpoolError?
        do { try pending?.run() } catch { failure = error as? SpoolError ?? SpoolError(.io, "\(error)") }
        lock.lock()
        if pending != nil { metrics.fsyncs.increment() }
        say(state.finishSync(upTo: target, failure: failure))
        if failure == nil && served > 0 {
            state.startGather(served: served, started: started, finished: monotonicNanos())
        }
        if state.group.writerAwaitsToken { lock.wakeWriter() }
        lock.broadcastProgress()
        resumeReady()
    }

    /// Drives the segment writer through `batch`, one write per segment it goes into: before
    /// each write the cap (``enforceCapBeforeWriting(activeSizeAfter:)``) makes room for it,
    /// and each roll is noted in the shared state first, so that a batch rolling many segments
    /// stays under the cap at every write. The writer only reports what it did; what follows
    /// from it (the cap's deletes, the segment list) is decided here. Write token held, lock
    /// not held.
    private func writeBatch(_ batch: ArraySlice<PendingBlock>, preallocating: Bool, mayRoll: Bool) -> SegmentWriter.Outcome {
        var outcome = SegmentWriter.Outcome()
        var rest = batch
        var noted = 0
        // The segments a roll sealed and the one it made, at their sizes now.
        func noteRolls() {
            let sealed = outcome.sealed[noted...]
            noted = outcome.sealed.count
            let active = writer.activeSegment
            lock.withLock {
                for segment in sealed { state.noteSegment(segment) }
                if let active { state.noteSegment(active) }
            }
        }
        do {
            while let first = rest.first {
                // During a sync, a block that needs a new segment waits for the sync's end.
                if !mayRoll && writer.needsRoll(before: first) { break }
                let staged: SegmentWriter.Staged
                do {
                    staged = try writer.stage(rest, &outcome)
                } catch {
                    noteRolls()  // a roll that failed after sealing: the sealed one's final size
                    throw error
                }
                if staged.rolled { noteRolls() }
                enforceCapBeforeWriting(activeSizeAfter: staged.activeSizeAfter)
                try writer.writeStaged(staged, preallocating: preallocating && staged.blocks == rest.count, &outcome)
                rest = rest.dropFirst(staged.blocks)
            }
        } catch {
            writer.discardStaged()
            outcome.error = error as? SpoolError ?? SpoolError(.io, "\(error)")
            return outcome
        }
        return outcome
    }

    /// A blocking caller's step while it waits for its record, on its own thread: writes (or
    /// syncs) what is pending itself when the state lets it lead (``LogState/nextLeaderWork(now:)``),
    /// then wakes the writer thread if it waits for the token or something arrived meanwhile (not
    /// otherwise: a wake-up for nothing is two context switches per record). False: it waits for
    /// the writer. Lock held on entry and exit.
    func leadWrite() -> Bool {
        guard let work = state.nextLeaderWork(now: monotonicNanos()) else { return false }
        perform(work, gathering: false)
        if state.group.writerAwaitsToken || !state.pending.isEmpty || !state.waiters.isEmpty {
            wakeForWork()
        }
        return true
    }

    /// Applies a write outcome to the shared state, says what it means, and wakes whoever it
    /// concerns. Lock held.
    private func publish(_ outcome: SegmentWriter.Outcome, batch: inout [PendingBlock]) {
        let recordsWritten = batch.prefix(outcome.blocksWritten).reduce(0) { $0 + $1.count }
        metrics.recordWrite(records: recordsWritten, blocks: outcome.blocksWritten, sealedInParallel: outcome.sealedInParallel,
                            stored: outcome.storedBytes, raw: outcome.rawBytes, fsyncs: outcome.fsyncs)
        let verdict = state.finishWrite(outcome, batch: &batch, activeSegment: writer.activeSegment,
                                        syncFailed: writer.syncFailed, now: monotonicNanos())
        if !outcome.sealed.isEmpty {
            scheduleRetention()
            scheduleRecompression()
        }
        metrics.recordSegments(count: state.table.segments.count, diskBytes: state.table.diskBytes)
        say(verdict)
        lock.broadcastProgress()
    }

    /// Logs what a write's verdict means and fails the waiters it leaves without their level.
    /// Lock held.
    private func say(_ verdict: WriteVerdict) {
        switch verdict {
        case .written:
            break
        case .recovered:
            logger.info("writing works again after an error")
        case .failed(let error):
            logger.error("fdatasync failed; the log refuses writes until it is reopened", metadata: ["error": "\(error)"])
            failPendingWaiters()
        case .stalled(let error):
            logger.warning("write failed; appends are refused until a retry succeeds", metadata: ["error": "\(error)"])
            failPendingWaiters()
        case .lostWhileClosing(let error):
            logger.error("write failed while closing; unwritten records are lost", metadata: ["error": "\(error)"])
            failPendingWaiters(with: error)
        }
    }

    /// Resumes the completed async waiters with the lock released, so each resumed caller can
    /// append again at once instead of queueing on the lock the writer holds. Lock held on
    /// entry and exit.
    func resumeReady() {
        guard state.hasReady else { return }
        // Taken and handed back emptied: no array is allocated per group.
        var ready = [UnsafeContinuation<Void, any Error>]()
        state.takeReady(&ready)
        lock.unlock()
        for continuation in ready { continuation.resume() }
        ready.removeAll(keepingCapacity: true)
        lock.lock()
        state.returnReadyBuffer(&ready)
    }

    /// Completes the waiters whose records reached their level, and fails every other one with
    /// `explicit` or the log's error. Lock held (this rare path, failure or close, resumes
    /// under it).
    func failPendingWaiters(with explicit: SpoolError? = nil) {
        let (ready, failed) = state.failPendingWaiters(with: explicit)
        for continuation in ready { continuation.resume() }
        for (continuation, error) in failed { continuation.resume(throwing: error) }
    }

    /// Tells the write observers how far the log is written, outside the lock, on the thread
    /// that wrote. Lock held on entry and exit.
    private func notifyObservers() {
        guard !state.observers.isEmpty else { return }
        let mark = state.writtenEnd
        let observers = state.observers
        lock.unlock()
        for observer in observers { observer.handler(mark) }
        lock.lock()
    }
}
