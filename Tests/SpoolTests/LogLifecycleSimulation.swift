import Foundation
@testable import Spool

/// A seeded, deterministic simulator of the log's state machine (`LogState`), as the sync
/// machine has one: a driver that, at every step, picks one of the events the log can receive
/// (appends at every durability, the writer's steps, its writes and syncs with injected write and
/// `fdatasync` failures and segment rolls, blocking callers leading a write, the pipeline thread's writes while a sync runs and
/// syncs ending in the middle of them, suspend and resume, idle suspension, consumers' commits
/// and retention, close) and checks the invariants after it. The I/O is a model (a
/// disk that knows what it holds and what is durable), so each seed runs in microseconds and a
/// failing seed replays exactly: `SPOOL_LOG_SIMULATION_SEED=<seed> swift test --filter LogLifecycleSimulationTests`.
///
/// Invariants, after every step:
/// - seqs are dense and never reused (`nextSeq` counts every append);
/// - the state never claims more than the disk holds: `writtenEnd` is the disk's end and
///   `syncedEnd` at most what is durable;
/// - no acknowledged record is lost: every wait that succeeded is covered by the disk (durably
///   for `synced`);
/// - pending bytes are the framed bytes of the records not yet written, and the pending blocks
///   cover exactly the records between the written end and the next seq;
/// - a suspended log holds no file and no write token;
/// - retention never deletes a segment a consumer has not passed, and none while the files are
///   released;
/// - the segment list is sorted and without repeats;
/// - a cold rewrite replaces only a listed sealed segment, never the active one, never one
///   retention or the cap took while it ran, and never while the files are released; `close()`
///   and `suspend()` let go of the files only once it has ended;
/// - once closed, no caller waits; at the end of every run every waiter has its answer;
/// - the pipeline: the state's sync in flight is the model's (the model's pipeline writes
///   stop at a roll and never sync, as the pipeline thread's do; `PipelinedCommitTests` checks
///   the writer keeps that); no waiter whose records reached its level is left waiting (unless
///   the log failed), so a failed sync can only fail the waiters of its group and of the ones
///   after it;
/// - group-commit gathering (after a writer's sync that served synced callers, on a model
///   clock): a gathering never waits longer than the write and sync before it, nor than
///   `gatherLimit`; the limit doubles after a burst of callers (up to a whole cycle), halves
///   after a steady stream, never below an eighth of a cycle, and a gathering ended early changes
///   nothing; an arrival wakes the writer exactly when no gathering holds it (a written caller
///   always); a gathering holds the writer only before its deadline, while its group is
///   incomplete, nothing but synced callers wait and the log is not closing, and while it holds
///   the writer neither writes nor syncs;
/// - the writer never goes on leaving unsealed a block a caller waits for, that lingered out or
///   that a close must write, and never rests with blocks to write or a sync a caller waits for.
///
/// The writer thread, the pipeline thread and a blocking caller leading a write are not
/// modelled: the simulator asks the state for their decisions (`LogState.nextWriterStep`,
/// `nextPipelineWork`, `nextLeaderWork`), the same calls `EventLog`'s threads make, and does
/// what they say on the model disk and the model clock.
struct LogLifecycleSimulation {
    struct Failure: Error, CustomStringConvertible {
        var seed: UInt64
        var step: Int
        var message: String
        var trace: [String]
        var description: String {
            "seed \(seed), step \(step): \(message)\n  replay: SPOOL_LOG_SIMULATION_SEED=\(seed) swift test --filter LogLifecycleSimulationTests\n  last steps:\n    " + trace.suffix(40).joined(separator: "\n    ")
        }
    }

    private enum Suspension {
        case none
        /// `suspend()` waits for what was appended to be durable (waiter `id`, nil: nothing to wait for).
        case flushing(id: Int?)
        case suspended
    }

    static let blockSize = 256
    static let segmentSize: Int64 = 600
    static let maxPending = 4096
    static let header: Int64 = 16
    /// The model log's `Configuration.linger`, in ns of the model clock.
    static let linger: UInt64 = 2_000

    let seed: UInt64
    private var rng: SplitMix64
    private var state = LogState(nextSeq: 0, segments: [SegmentInfo(baseSeq: 0, size: header)], blockSize: blockSize, linger: linger)
    private var trace: [String] = []
    private var step = 0

    // The model of the disk and of the callers.
    private var expectedNext: UInt64 = 0
    private var framedPending = 0
    private var diskEnd: UInt64 = 0
    private var durableEnd: UInt64 = 0
    private var activeBase: UInt64 = 0
    private var activeSize: Int64 = header
    private var filesOpen = true
    /// A write in flight: the batch the writer took, whether it syncs after it, and whether it
    /// began during a sync (the pipeline thread's: it neither rolls nor syncs).
    private var inFlight: (batch: [PendingBlock], sync: Bool, duringSync: Bool)?
    /// Synced callers the writer's write in flight (or the sync after it) serves: a gathering
    /// follows that sync if it succeeds (nil: the pipeline's write, or a sync alone).
    private var gatherServed: Int?
    /// The model's monotonic clock (ns) for gathering: every event moves it on.
    private var clock: UInt64 = 1_000_000
    /// What a gathering broke when it began or ended.
    private var gatherBroken: String?
    /// What the writer's step broke about the linger or the work left pending.
    private var lingerBroken: String?
    private var syncing: UInt64?
    private var waiting: [Int: (end: UInt64, level: Durability)] = [:]
    private var acknowledged: [(end: UInt64, level: Durability)] = []
    private var consumers: [String: UInt64] = [:]
    private var retention: (doomed: [SegmentInfo], forgotten: [SegmentInfo])?
    /// What a retention run broke when it began, checked with the other invariants.
    private var retentionBroken: String?
    /// A cold rewrite in flight (the segment as it began), and what one broke.
    private var rewriting: SegmentInfo?
    private var rewriteBroken: String?
    /// What a suspension broke when it began.
    private var suspendBroken: String?
    /// How the rewrites ended: replaced, abandoned (cancelled or refused at the check).
    private(set) var rewritesReplaced = 0
    private(set) var rewritesAbandoned = 0
    private var bytesSavedByRewrites: UInt64 = 0
    /// How the gatherings ended that taught the limit: a burst (a window twice as long, up to
    /// a whole cycle) or a steady stream (half as long).
    private(set) var gatheringBursts = 0
    private(set) var gatheringStreams = 0
    private var suspension = Suspension.none
    private var idleQueued = false
    private var closing = false
    private var closed = false
    /// A write failed while closing: its records were given up, so the pending blocks no
    /// longer cover the records past the written end.
    private var recordsGivenUp = false

    init(seed: UInt64) {
        self.seed = seed
        rng = SplitMix64(seed: seed)
    }

    /// Runs `steps` random events, then closes the log and drains it; throws the first broken invariant.
    mutating func run(steps: Int) throws {
        while step < steps && !closed {
            step += 1
            randomEvent()
            try check()
        }
        var guardSteps = 0
        while case .flushing = suspension {
            // close() waits for a suspend() in progress (both take the lifecycle lock).
            step += 1
            guardSteps += 1
            if retention != nil {
                runRetention()  // suspend() waits for a retention run in flight
            } else if rewriting != nil {
                rewriteStep()  // and for a cold rewrite
            } else if syncing != nil {
                syncOnly()
            } else if inFlight != nil {
                write()
            } else {
                writerStep()
            }
            suspendStep()
            try check()
            if guardSteps > 10_000 { throw failure("suspend() never finished its flush (\(suspension); ends \(state.writtenEnd)/\(state.syncedEnd)/\(state.nextSeq), waiters \(state.waiters.map { ($0.wait.end, $0.level) }), writing \(state.group.writing), retentions \(state.table.retentionsInFlight))") }
        }
        if !closing { close() }
        while !closed {
            step += 1
            guardSteps += 1
            drainStep()
            try check()
            if guardSteps > 10_000 { throw failure("the log never finished closing") }
        }
        if !waiting.isEmpty { throw failure("waiters without an answer after close: \(waiting.keys.sorted())") }
    }

    // MARK: Events

    private mutating func randomEvent() {
        clock += 1 + rng.next() % 400
        switch rng.next() % 100 {
        case 0..<35: append()
        case 35..<45: lead()
        case 45..<62: write()
        case 62..<70: syncOnly()
        case 70..<76: commit()
        case 76..<82: runRetention()
        case 82..<87: suspendStep()
        case 87..<91: resume()
        case 91..<95: idleSuspension()
        case 95..<97: if rng.next() % 4 == 0 { close() } else { lead() }
        case 97..<99: rewriteStep()
        default: collect()
        }
    }

    /// After close: what the writer does until it exits (its own steps), then close's own end.
    private mutating func drainStep() {
        if retention != nil { return runRetention() }
        if rewriting != nil { return rewriteStep() }
        if inFlight != nil { return write() }
        if syncing != nil { return syncOnly() }
        if !state.group.writerExited { return writerStep() }
        if state.table.retentionsInFlight == 0 && state.table.rewrite == nil {
            let unwritten = state.finishClosing()
            log("closed, \(unwritten.count) unwritten")
            filesOpen = false
            state.markCloseFinished()
            closed = true
        }
    }

    private mutating func append() {
        let size = Int(rng.next() % 60)
        let framed = PendingBlock.framedSize(size)
        guard state.status.error == nil else { return log("append refused: \(state.status.error!.code)") }
        guard state.pending.bytes + framed <= Self.maxPending else { return log("append waits (backpressure)") }
        let payload = [UInt8](repeating: UInt8(truncatingIfNeeded: expectedNext), count: size)
        let (seq, _, _) = payload.withUnsafeBytes { state.append($0, timestamp: 1_000, now: clock) }
        expectedNext = seq == expectedNext ? expectedNext + 1 : UInt64.max  // checked below
        framedPending += framed
        let levels: [Durability] = [.buffered, .written, .synced]
        let level = levels[Int(rng.next() % 3)]
        log("append \(seq) (\(size) B) at \(level)")
        if level != .buffered {
            let id = state.addBlockingWaiter(Wait(end: seq + 1, record: seq), level: level)
            waiting[id] = (seq + 1, level)
        }
    }

    /// A blocking caller waiting for its record: it writes or syncs what is pending itself when
    /// the state lets it lead (`EventLog.leadWrite`), never starting a gathering.
    private mutating func lead() {
        guard let work = state.nextLeaderWork(now: clock) else { return }
        log("a blocking caller leads: \(work)")
        begin(work, gathers: false, pipelined: false)
    }

    /// The writer thread's step: what `LogState.nextWriterStep` decides, done on the model (a
    /// write or sync begins, the waiters fail, the writer exits; a sleep lets the model clock
    /// run), and the invariants of that decision checked against the state before it.
    private mutating func writerStep() {
        guard !state.group.writerExited else { return }
        let gathering = state.group.gather
        let before = (limit: state.group.gatherLimit, synced: state.waiters.synced, waiters: state.waiters.count)
        let step = state.nextWriterStep(now: clock)
        if let gathering, state.group.gather == nil {
            checkGatheringEnd(gathering, limit: before.limit, synced: before.synced)
        }
        if let gathering {
            // The contract of a gathering: it holds the writer only before its deadline, while
            // the group is incomplete, nothing but synced callers wait and the log is not
            // closing; and while it holds, the writer neither writes nor syncs.
            let holds = !closing && clock < gathering.deadline && before.synced < gathering.target && before.waiters == before.synced
            switch step {
            case .gather(let until):
                if !holds || until != gathering.deadline {
                    gatherBroken = "the writer gathers until \(until) (deadline \(gathering.deadline), \(before.synced) of \(gathering.target) synced, \(before.waiters) waiting, at \(clock)), but the gathering no longer holds"
                }
            case .work, .idle, .linger:
                if holds { gatherBroken = "the writer went on (\(step)) while its gathering holds (\(before.synced) of \(gathering.target), at \(clock) before \(gathering.deadline))" }
            case .awaitToken, .failWaiters, .retry, .exit:
                break
            }
        }
        switch step {
        case .gather, .linger, .awaitToken, .failWaiters, .retry:
            break
        case .exit where state.status.isFailed:
            break  // a failed log writes nothing more
        case .idle, .work, .exit:
            // Past a gathering and the linger: no block is left that a caller waits for, that
            // lingered out, or that a close must write.
            if !state.pending.current.isEmpty && (closing || !state.waiters.isEmpty || clock >= state.pending.current.openedAt + Self.linger) {
                lingerBroken = "the writer went on (\(step)) leaving the current block unsealed (opened at \(state.pending.current.openedAt), now \(clock), \(state.waiters.count) waiting)"
            }
        }
        if step == .idle || step == .exit, !state.status.isFailed, !state.pending.full.isEmpty || (state.waiters.synced > 0 && state.writtenEnd > state.syncedEnd) {
            lingerBroken = "the writer rests (\(step)) with \(state.pending.full.count) full blocks and synced callers at \(state.syncedEnd) of \(state.writtenEnd)"
        }
        log("the writer: \(step)")
        switch step {
        case .awaitToken, .idle:
            break
        case .failWaiters:
            failWaiters(nil)
            collect()
        case .retry(let at):
            clock = max(clock, at)  // it sleeps until the retry
        case .gather, .linger:
            clock += 1 + rng.next() % 1_000  // it sleeps, and time passes
        case .work(let work):
            begin(work, gathers: true, pipelined: false)
        case .exit:
            state.writerDidExit()
            failWaiters(nil)
            collect()
        }
    }

    /// Starts the write or sync a writing thread chose: `gathers` (the writer thread's) starts a
    /// gathering after a sync that served synced callers; `pipelined` (the pipeline thread's)
    /// writes during a sync and never syncs.
    private mutating func begin(_ work: WriterWork, gathers: Bool, pipelined: Bool) {
        switch work {
        case .write(let sync):
            let (taken, served) = state.beginWrite()
            inFlight = (taken, sync && !pipelined, pipelined)
            if !pipelined { gatherServed = gathers ? served : nil }
            log("write begins: \(taken.count) blocks\(pipelined ? " (during a sync)" : "")")
        case .sync:
            syncing = state.beginSync()
            gatherServed = nil
            log("sync begins to \(syncing!)")
        }
    }

    /// The writer: takes the full blocks, or finishes the write it took, with an outcome from
    /// the model disk (rolls, a write error after some blocks, a failed `fdatasync`).
    private mutating func write() {
        guard let (batch, sync, duringSync) = inFlight else {
            guard syncing != nil else { return writerStep() }
            // The pipeline thread: only when the state lets it, and never once the writer exited.
            guard !state.group.writerExited, let work = state.nextPipelineWork() else { return }
            return begin(work, gathers: false, pipelined: true)
        }
        var batchCopy = batch
        inFlight = nil
        var outcome = SegmentWriter.Outcome()
        let roll = rng.next() % 100
        let failAt: Int? = roll < 4 ? Int(rng.next() % UInt64(batch.count + 1)) : nil
        for (index, block) in batch.enumerated() {
            if index == failAt { break }
            let size = Int64(block.raw.count / 2 + 12)
            if activeSize > Self.header && activeSize + size > Self.segmentSize {
                if duringSync { break }  // the rest waits for the sync's end
                let sealed = SegmentInfo(baseSeq: activeBase, size: activeSize)
                outcome.sealed.append(sealed)
                outcome.fsyncs += 2
                durableEnd = max(durableEnd, diskEnd)  // sealing syncs the segment
                activeBase = block.firstSeq
                activeSize = Self.header
                state.noteSegment(sealed)
                state.noteSegment(SegmentInfo(baseSeq: activeBase, size: activeSize))
            }
            activeSize += size
            diskEnd = block.firstSeq + UInt64(block.count)
            outcome.blocksWritten += 1
            framedPending -= block.charge
        }
        var syncFailed = false
        if let failAt, failAt < batch.count {
            outcome.error = SpoolError(.diskFull, "simulated ENOSPC")
        } else if !outcome.sealed.isEmpty && roll < 5 {
            // A roll's fdatasync (or the new segment's) failed.
            syncFailed = true
            outcome.error = SpoolError(.io, "simulated fdatasync failure")
        }
        let verdict = state.finishWrite(outcome, batch: &batchCopy, activeSegment: SegmentInfo(baseSeq: activeBase, size: activeSize),
                                        syncFailed: syncFailed, now: clock)
        log("write ends: \(outcome.blocksWritten) of \(batch.count) blocks: \(verdict)")
        if sync && outcome.error == nil && !state.status.isFailed {
            // The writer syncs in the same step, holding the sync token only.
            syncing = state.beginSync()
            log("sync begins to \(syncing!)")
        } else if !duringSync {
            gatherServed = nil
        }
        switch verdict {
        case .written, .recovered: break
        case .stalled, .failed: failWaiters(nil)
        case .lostWhileClosing(let error):
            framedPending = 0
            recordsGivenUp = true
            failWaiters(error)
        }
        collect()
    }

    private mutating func syncOnly() {
        if let target = syncing {
            syncing = nil
            let fails = rng.next() % 100 < 3
            if !fails { durableEnd = max(durableEnd, target) }
            let verdict = state.finishSync(upTo: target, failure: fails ? SpoolError(.io, "simulated fdatasync failure") : nil)
            log("sync ends: \(verdict)")
            if case .failed = verdict { failWaiters(nil) }
            if let served = gatherServed, served > 0, !fails { startGathering(served: served) }
            gatherServed = nil
            return collect()
        }
        writerStep()
    }

    /// The writer's sync of `served` synced callers ended: it gathers the next group, as
    /// `EventLog.runSync` does, after a write and sync that took a random time.
    private mutating func startGathering(served: Int) {
        let cycle = 1 + rng.next() % 4_000
        let limit = state.group.gatherLimit
        let waiting = state.waiters.synced
        state.startGather(served: served, started: clock - cycle, finished: clock)
        guard let gathering = state.group.gather else { gatherBroken = "no gathering began"; return }
        let window = gathering.window
        log("gathering: \(served) served, \(waiting) waiting, window \(window) of a \(cycle) ns cycle")
        if gathering.began != clock || window != min(cycle, limit) || gathering.target != served + waiting {
            gatherBroken = "a gathering after a \(cycle) ns cycle under a limit of \(limit) waits \(window) ns for \(gathering.target) (served \(served), waiting \(waiting))"
        }
    }

    /// A gathering ended (in the writer's step at `clock`): it taught the limit what the model
    /// expects. `limit` and `synced` are the limit and the synced callers waiting before that step.
    private mutating func checkGatheringEnd(_ gathering: Gathering, limit: UInt64, synced: Int) {
        let onItsTerms = synced >= gathering.target || clock >= gathering.deadline
        let arrived = UInt64(max(0, synced - gathering.waitingAtStart))
        let elapsed = max(1, clock - gathering.began)
        let window = gathering.window
        let expected: UInt64
        if !onItsTerms {
            expected = limit
        } else if Double(arrived) / Double(elapsed) >= Double(gathering.served) / (0.75 * Double(gathering.cycle)) {
            expected = 2 * window >= gathering.cycle ? .max : 2 * window
            gatheringBursts += 1
        } else {
            expected = max(gathering.cycle / 8, window / 2)
            gatheringStreams += 1
        }
        log("gathering ends: \(arrived) arrived in \(elapsed) ns, limit \(limit) -> \(state.group.gatherLimit)")
        if state.group.gatherLimit != expected {
            gatherBroken = "a gathering (\(arrived) of \(gathering.served) back in \(elapsed) ns of a \(window) ns window, cycle \(gathering.cycle), on its terms: \(onItsTerms)) left the limit \(state.group.gatherLimit), expected \(expected)"
        }
    }

    private mutating func commit() {
        let name = rng.next() % 2 == 0 ? "a" : "b"
        let from = consumers[name] ?? state.firstSeq
        guard state.syncedEnd >= from else { return }
        let next = from + rng.next() % (state.syncedEnd - from + 1)
        consumers[name] = next
        state.recordCommit(of: name, at: next)
        log("consumer \(name) commits \(next)")
    }

    private mutating func runRetention() {
        if let (doomed, forgotten) = retention {
            retention = nil
            state.finishRetention(deleted: forgotten.count)
            log("retention deleted \(forgotten.map(\.baseSeq)) of \(doomed.map(\.baseSeq))")
            return
        }
        let doomed = state.beginRetention()
        guard !doomed.isEmpty else { return }
        if case .suspended = suspension, !closing { retentionBroken = "retention runs while suspended" }
        let floor = consumers.values.min() ?? 0
        for segment in doomed {
            // A segment's records end where the next one starts: at or below every consumer's offset.
            let end = state.table.segments.first { $0.baseSeq > segment.baseSeq }?.baseSeq ?? UInt64.max
            if end > floor { retentionBroken = "retention deletes segment \(segment.baseSeq), whose records reach \(end), past consumer offset \(floor)" }
        }
        retention = (doomed, state.forgetSegments(doomed))
        log("retention begins: \(doomed.map(\.baseSeq))")
    }

    /// Cold recompression: begins a rewrite of a random listed segment (a sealed one, or the
    /// active one, which must be refused), or moves the one in flight on: the cap cancels it,
    /// or it ends, replacing its segment when the state says it may and the segment is listed
    /// as it began (the segment-files lock's check), else abandoning it.
    private mutating func rewriteStep() {
        guard let segment = rewriting else {
            guard !state.table.segments.isEmpty else { return }
            let pick = state.table.segments[Int(rng.next() % UInt64(state.table.segments.count))]
            guard let begun = state.beginRewrite(of: pick)?.segment else { return }
            if begun.baseSeq == state.table.segments.last?.baseSeq { rewriteBroken = "a rewrite of the active segment \(begun.baseSeq) began" }
            if !filesOpen || closing { rewriteBroken = "a rewrite began while the files are released or the log closes" }
            rewriting = begun
            return log("rewrite of \(begun.baseSeq) begins (\(begun.size) bytes)")
        }
        switch rng.next() % 4 {
        case 0:
            state.cancelRewrite()
            log("the cap cancels the rewrite of \(segment.baseSeq)")
        default:
            let listed = state.table.segments.contains { $0.baseSeq == segment.baseSeq && $0.size == segment.size }
            if state.rewriteMayContinue && listed {
                if !filesOpen { rewriteBroken = "a rewrite renamed over \(segment.baseSeq) while the files are released" }
                if segment.baseSeq == state.table.segments.last?.baseSeq { rewriteBroken = "a rewrite replaced the active segment" }
                let size = max(Self.header, segment.size / 2)
                state.finishRewrite(replacedBy: size)
                rewritesReplaced += 1
                bytesSavedByRewrites += UInt64(segment.size - size)
                log("rewrite of \(segment.baseSeq) replaces it (\(size) bytes)")
            } else {
                state.finishRewrite(replacedBy: nil)
                rewritesAbandoned += 1
                log("rewrite of \(segment.baseSeq) abandoned")
            }
            rewriting = nil
        }
    }

    /// `suspend()`, one step at a time; `onlyIfIdle`: the queued idle suspension's.
    private mutating func suspendStep(onlyIfIdle: Bool = false) {
        switch suspension {
        case .none:
            guard !closing else { return }
            do {
                guard let target = try state.beginSuspend(onlyIfIdle: onlyIfIdle) else {
                    return log(onlyIfIdle ? "idle suspension: no longer idle" : "suspend: nothing to do")
                }
                if onlyIfIdle && !state.hasNothingPending { suspendBroken = "an idle suspension began with records pending" }
                if target <= state.syncedEnd {
                    suspension = .flushing(id: nil)
                } else {
                    let id = state.addBlockingWaiter(Wait(end: target, record: nil), level: .synced)
                    waiting[id] = (target, .synced)
                    suspension = .flushing(id: id)
                }
                log("suspend begins, flushing to \(target)")
            } catch {
                log("suspend refused: \(error)")
            }
        case .flushing(let id):
            if let id {
                guard let result = state.takeBlockingResult(id) else { return }
                waiting[id] = nil
                suspension = .flushing(id: nil)  // answered: what is left is the write token
                if case .failure = result {
                    state.abandonSuspend()
                    suspension = .none
                    return log("suspend's flush failed; the log stays open")
                }
            }
            guard state.takeWriteToken(waitingForRetention: true) else { return log("suspend waits for the write token") }
            filesOpen = false
            state.markReleased()
            state.releaseWriteToken(resuming: false)
            suspension = .suspended
            log("suspended")
        case .suspended:
            break
        }
    }

    private mutating func resume() {
        guard case .suspended = suspension, !closing else { return }
        guard state.takeWriteToken(waitingForRetention: false) else { return log("resume waits for the write token") }
        filesOpen = true
        state.releaseWriteToken(resuming: true)
        suspension = .none
        log("resumed")
    }

    private mutating func idleSuspension() {
        if idleQueued {
            // It takes the lifecycle lock a suspend() in progress holds: it runs after that one.
            if case .flushing = suspension { return }
            idleQueued = false
            log("idle suspension runs")
            if case .suspended = suspension {
                let target = try? state.beginSuspend(onlyIfIdle: true)
                if target != nil { suspendBroken = "an idle suspension began on a suspended log" }
                return
            }
            return suspendStep(onlyIfIdle: true)
        }
        guard inFlight == nil, syncing == nil, state.queueIdleSuspension() else { return }
        idleQueued = true
        log("idle suspension queued")
    }

    private mutating func close() {
        guard !closing else { return }
        if case .flushing = suspension { return }  // close() and suspend() take the lifecycle lock in turn
        guard state.requestClose() else { return }
        closing = true
        log("close requested")
    }

    /// Collects the answers of the blocking waiters, checking each success against the disk.
    private mutating func collect() {
        for id in waiting.keys.sorted() {
            if case .flushing(let flushing) = suspension, flushing == id { continue }  // suspend() takes its own answer
            guard let result = state.takeBlockingResult(id), let wait = waiting.removeValue(forKey: id) else { continue }
            if case .success = result { acknowledged.append(wait) }
        }
    }

    private mutating func failWaiters(_ error: SpoolError?) {
        let (ready, failed) = state.failPendingWaiters(with: error)
        precondition(ready.isEmpty && failed.isEmpty, "the simulator's waiters are all blocking ones")
    }

    // MARK: Invariants

    private func check() throws {
        if state.nextSeq != expectedNext { throw failure("nextSeq is \(state.nextSeq), the model counts \(expectedNext) appends (a seq reused or skipped)") }
        if state.writtenEnd != diskEnd { throw failure("writtenEnd \(state.writtenEnd) but the disk ends at \(diskEnd)") }
        if state.syncedEnd > durableEnd { throw failure("syncedEnd \(state.syncedEnd) past the durable end \(durableEnd)") }
        if !(state.syncedEnd <= state.writtenEnd && state.writtenEnd <= state.nextSeq) {
            throw failure("ends out of order: synced \(state.syncedEnd), written \(state.writtenEnd), next \(state.nextSeq)")
        }
        for wait in acknowledged where wait.end > (wait.level == .synced ? durableEnd : diskEnd) {
            throw failure("an acknowledged wait for records below \(wait.end) at \(wait.level) is not on the disk")
        }
        if state.pending.bytes != framedPending { throw failure("pendingBytes \(state.pending.bytes), the model's \(framedPending)") }
        if !recordsGivenUp {
            var next = state.writtenEnd
            for block in (inFlight?.batch ?? []) + state.pending.full + [state.pending.current] where !block.isEmpty {
                if block.firstSeq != next { throw failure("a pending block starts at \(block.firstSeq), expected \(next)") }
                next += UInt64(block.count)
            }
            if next != state.nextSeq { throw failure("the pending blocks end at \(next), nextSeq is \(state.nextSeq)") }
        }
        if state.status.isSuspended && (filesOpen || state.group.writing) { throw failure("suspended while holding files or the write token") }
        if case .suspended = suspension, !state.status.isSuspended, !closing { throw failure("suspend() returned but the log does not say it is suspended") }
        let bases = state.table.segments.map(\.baseSeq)
        if bases != bases.sorted() || Set(bases).count != bases.count { throw failure("segment list \(bases) is not sorted and unique") }
        if let retentionBroken { throw failure(retentionBroken) }
        if let rewriteBroken { throw failure(rewriteBroken) }
        if let suspendBroken { throw failure(suspendBroken) }
        if let gatherBroken { throw failure(gatherBroken) }
        if let lingerBroken { throw failure(lingerBroken) }
        if !state.shouldWakeWriter(for: .written) { throw failure("a written caller would not wake the writer") }
        let gatherHolds = state.group.gather.map { state.waiters.synced < $0.target } ?? false
        if state.shouldWakeWriter(for: .synced) == gatherHolds {
            throw failure("a synced arrival \(gatherHolds ? "wakes" : "does not wake") the writer with \(state.waiters.synced) waiting and the gathering \(String(describing: state.group.gather))")
        }
        if state.group.syncTarget != syncing { throw failure("the state's sync in flight \(String(describing: state.group.syncTarget)) is not the model's \(String(describing: syncing))") }
        if !state.status.isFailed, let waiter = state.waiters.first(where: { $0.wait.end <= state.mark(for: $0.level) }) {
            throw failure("a waiter for records below \(waiter.wait.end) at \(waiter.level) is still waiting, though they reached it")
        }
        if (state.table.rewrite != nil) != (rewriting != nil) { throw failure("the state's rewrite \(String(describing: state.table.rewrite)) is not the model's") }
        if state.table.rewriteReservation < 0 { throw failure("a negative rewrite reservation") }
        let listed = state.table.segments.reduce(Int64(0)) { $0 + $1.size }
        if state.table.diskBytes != listed { throw failure("the table counts \(state.table.diskBytes) bytes on disk; its segments hold \(listed)") }
        if let rewrite = state.table.rewrite, rewrite.stop.isRaised == state.rewriteMayContinue {
            throw failure("the rewrite's stop flag (raised: \(rewrite.stop.isRaised)) disagrees with the state (may continue: \(state.rewriteMayContinue))")
        }
        if state.counters.segmentsRecompressed != UInt64(rewritesReplaced) || state.counters.bytesSavedByRecompression != bytesSavedByRewrites {
            throw failure("the counters say \(state.counters.segmentsRecompressed) rewrites saving \(state.counters.bytesSavedByRecompression) bytes, the model \(rewritesReplaced) saving \(bytesSavedByRewrites)")
        }
        let synced = state.waiters.filter { $0.level == .synced }.count
        if synced != state.waiters.synced { throw failure("syncedWaiters \(state.waiters.synced), counted \(synced)") }
        if state.status.closeFinished && !state.waiters.isEmpty { throw failure("closed with \(state.waiters.count) callers waiting") }
    }

    /// The run's outcome in brief (its last steps, ends and counters), to tell two runs apart.
    var fingerprint: String {
        "\(trace.suffix(50).joined(separator: "|"))|\(state.nextSeq)|\(state.writtenEnd)|\(state.syncedEnd)|\(acknowledged.count)"
    }

    private func failure(_ message: String) -> Failure {
        Failure(seed: seed, step: step, message: message, trace: trace)
    }

    private mutating func log(_ line: String) {
        trace.append("\(step): \(line) [\(state.status)]")
        if trace.count > 200 { trace.removeFirst(100) }
    }
}
