import Testing
@testable import Spool

/// `LogState` as a pure machine, by hand: the lifecycle's transitions and what each refuses.
/// The seeded simulator (`LogLifecycleSimulationTests`) covers the interleavings.
@Suite struct LogStateTests {
    private func state(appending count: Int) -> LogState {
        var state = LogState(nextSeq: 0, segments: [SegmentInfo(baseSeq: 0, size: 16)], blockSize: 1024, linger: 0)
        let payload = [UInt8](repeating: 7, count: 10)
        for _ in 0..<count {
            _ = payload.withUnsafeBytes { state.append($0, timestamp: 1, now: 0) }
        }
        return state
    }

    /// Writes everything pending: the writer's steps (write, then sync when asked), with a successful outcome.
    private func writeAll(_ state: inout LogState, sync: Bool, error: SpoolError? = nil, syncFailed: Bool = false) -> WriteVerdict {
        state.sealCurrentBlock()
        var (batch, _) = state.beginWrite()
        var outcome = SegmentWriter.Outcome()
        outcome.blocksWritten = error == nil ? batch.count : 0
        outcome.error = error
        let verdict = state.finishWrite(outcome, batch: &batch, activeSegment: SegmentInfo(baseSeq: 0, size: 100), syncFailed: syncFailed, now: 0)
        guard sync, error == nil else { return verdict }
        let target = state.beginSync()
        return state.finishSync(upTo: target, failure: nil)
    }

    /// The queued idle suspension begins only if nothing is pending at that very step; either
    /// way it is no longer queued, so the next idle spell can queue one again.
    @Test func anIdleSuspensionBeginsOnlyWithNothingPending() throws {
        var state = state(appending: 0)
        let queued = state.queueIdleSuspension()
        let again = state.queueIdleSuspension()
        #expect(queued && !again, "one at a time")
        let payload = [UInt8](repeating: 7, count: 10)
        _ = payload.withUnsafeBytes { state.append($0, timestamp: 1, now: 0) }
        let pending = try state.beginSuspend(onlyIfIdle: true)
        #expect(pending == nil, "a record came after the queueing")
        #expect(state.status.isOpen && state.status.error == nil)
        _ = writeAll(&state, sync: true)
        let requeued = state.queueIdleSuspension()
        #expect(requeued, "no longer queued: the next idle spell queues again")
        let idle = try state.beginSuspend(onlyIfIdle: true)
        #expect(idle == 1)
        #expect(state.status.filesReleased)
    }

    @Test func suspendRefusesAppendsUntilResumed() throws {
        var state = state(appending: 3)
        let target = try state.beginSuspend()
        #expect(target == 3)
        #expect(state.status.error?.code == .suspended)
        #expect(state.status.filesReleased)
        let again = try state.beginSuspend()
        #expect(again == nil, "suspending twice does nothing")
        _ = writeAll(&state, sync: true)
        let token = state.takeWriteToken(waitingForRetention: true)
        #expect(token)
        state.markReleased()
        state.releaseWriteToken(resuming: false)
        #expect(state.status.isSuspended && !state.group.writing)
        let resumeToken = state.takeWriteToken(waitingForRetention: false)
        #expect(resumeToken)
        state.releaseWriteToken(resuming: true)
        #expect(state.status.error == nil && !state.status.isSuspended && !state.status.filesReleased)
    }

    @Test func aFailedFlushLeavesTheLogStalledNotSuspended() throws {
        var state = state(appending: 2)
        _ = try state.beginSuspend()
        let verdict = writeAll(&state, sync: true, error: SpoolError(.diskFull, "no space"))
        guard case .stalled = verdict else { Issue.record("a failed write stalls, got \(verdict)"); return }
        state.abandonSuspend()
        #expect(state.status.error?.code == .diskFull, "the write error, not .suspended")
        var copy = state
        #expect(throws: SpoolError.self) { _ = try copy.beginSuspend() }
        #expect(state.retryAt != nil)
    }

    @Test func closingAFailedLogKeepsItFailedAndClosesOnce() {
        var state = state(appending: 2)
        let verdict = writeAll(&state, sync: true, error: SpoolError(.io, "fdatasync"), syncFailed: true)
        guard case .failed = verdict else { Issue.record("a failed sync fails the log, got \(verdict)"); return }
        #expect(state.status.error?.code == .failed)
        let first = state.requestClose()
        #expect(first)
        #expect(state.status.closeRequested && state.status.error?.code == .failed, "closing keeps the failure")
        let second = state.requestClose()
        #expect(!second, "only the first close closes")
        let unwritten = state.finishClosing()
        #expect(unwritten == 0..<2)
        #expect(!state.status.closeFinished)
        state.markCloseFinished()
        #expect(state.status.closeFinished && state.status.error?.code == .closed)
    }

    @Test func closingASuspendedLogReleasesNothingTwice() throws {
        var state = state(appending: 0)
        _ = try state.beginSuspend()
        let token = state.takeWriteToken(waitingForRetention: true)
        #expect(token)
        state.markReleased()
        state.releaseWriteToken(resuming: false)
        let closes = state.requestClose()
        #expect(closes)
        #expect(!state.status.isSuspended, "a closed log is not reported suspended")
        let doomed = state.beginRetention()
        #expect(doomed.isEmpty && state.status.filesReleased)
        let unwritten = state.finishClosing()
        #expect(unwritten.isEmpty)
    }

    /// A write during a sync that stops before a roll puts the rest back and stops the
    /// pipeline until the sync ends (else the pipeline thread would retry it in a busy loop).
    @Test func aPipelinedWriteStoppedAtARollWaitsForTheSyncsEnd() {
        var state = state(appending: 1)
        _ = writeAll(&state, sync: false)
        let target = state.beginSync()
        let payload = [UInt8](repeating: 7, count: 10)
        for _ in 0..<2 {
            _ = payload.withUnsafeBytes { state.append($0, timestamp: 1, now: 0) }
            state.sealCurrentBlock()
        }
        #expect(state.pipelineCanWrite)
        var (batch, _) = state.beginWrite()
        var outcome = SegmentWriter.Outcome()
        outcome.blocksWritten = 1  // the second block needs a new segment
        let verdict = state.finishWrite(outcome, batch: &batch, activeSegment: SegmentInfo(baseSeq: 0, size: 100), syncFailed: false, now: 0)
        guard case .written = verdict else { Issue.record("got \(verdict)"); return }
        #expect(state.writtenEnd == 2 && state.pending.full.count == 1 && state.pending.full.first?.firstSeq == 2, "the rest is queued again, in order")
        #expect(!state.pipelineCanWrite, "nothing more is written during this sync")
        _ = state.finishSync(upTo: target, failure: nil)
        #expect(state.syncedEnd == 1 && state.pending.full.count == 1, "the writer rolls and writes it after the sync")
    }

    @Test func aWriteAfterAStallRecovers() {
        var state = state(appending: 2)
        _ = writeAll(&state, sync: false, error: SpoolError(.diskFull, "no space"))
        #expect(state.status.error?.code == .diskFull && state.writtenEnd == 0)
        var (batch, _) = state.beginWrite()
        var outcome = SegmentWriter.Outcome()
        outcome.blocksWritten = batch.count
        let verdict = state.finishWrite(outcome, batch: &batch, activeSegment: SegmentInfo(baseSeq: 0, size: 100), syncFailed: false, now: 0)
        guard case .recovered = verdict else { Issue.record("got \(verdict)"); return }
        #expect(state.status.error == nil && state.writtenEnd == 2 && state.retryAt == nil)
    }

    /// What a new waiter tells the append path (`LogState.addWaiter`): wake the writer, except
    /// for synced callers while the writer gathers the group an fdatasync just served, until as
    /// many of them are back as it served.
    @Test func aWaiterWakesTheWriterUnlessItsGroupIsStillGathering() {
        var state = state(appending: 2)
        func waiter(_ seq: UInt64, _ level: Durability) -> Waiter {
            Waiter(wait: Wait(end: seq + 1, record: seq), level: level, kind: .blocking(id: Int(seq)))
        }
        let first = state.addWaiter(waiter(0, .synced))
        let second = state.addWaiter(waiter(1, .synced))
        #expect(first && second, "no group is gathering")
        _ = writeAll(&state, sync: true)
        #expect(state.syncedEnd == 2 && state.waiters.synced == 0)
        state.startGather(served: 2, started: 0, finished: 100)
        let payload = [UInt8](repeating: 7, count: 10)
        for _ in 0..<3 {
            _ = payload.withUnsafeBytes { state.append($0, timestamp: 1, now: 0) }
        }
        let oneBack = state.addWaiter(waiter(2, .synced))
        #expect(!oneBack, "one of the two served is back: the group still gathers")
        let written = state.addWaiter(waiter(3, .written))
        #expect(written, "a written caller never waits for a group")
        let bothBack = state.addWaiter(waiter(4, .synced))
        #expect(bothBack, "both are back: the group is complete")
    }

    /// Gathering adapts (`LogState.endGather(at:)`): callers coming back in a burst keep the
    /// whole write-and-sync as the window; a steady stream halves it, down to an eighth of a
    /// cycle; bursts double it back to a whole one; a gathering ended early teaches nothing.
    @Test func gatheringShortensForASteadyStreamAndComesBackForABurst() {
        var state = state(appending: 0)
        var seq: UInt64 = 0
        func arrive(_ count: Int, _ level: Durability = .synced) {
            let payload = [UInt8](repeating: 7, count: 10)
            for _ in 0..<count {
                _ = payload.withUnsafeBytes { state.append($0, timestamp: 1, now: 0) }
                _ = state.addWaiter(Waiter(wait: Wait(end: seq + 1, record: seq), level: level, kind: .blocking(id: Int(seq))))
                seq += 1
            }
        }
        /// A write and sync of `served` callers that took 1,000 ns and ended at `end`, with
        /// `duringSync` synced callers arriving meanwhile, then a gathering.
        func gather(served: Int, endingAt end: UInt64, duringSync: Int = 0) -> Gathering {
            _ = writeAll(&state, sync: true)
            arrive(duringSync)
            state.startGather(served: served, started: end - 1_000, finished: end)
            return state.group.gather!
        }
        // A closed loop: the 4 served are back 100 ns after the sync: the window stays whole.
        arrive(4)
        var window = gather(served: 4, endingAt: 10_000)
        #expect(window.deadline == 11_000 && window.target == 4)
        arrive(4)
        state.endGather(at: 10_100)
        #expect(state.group.gatherLimit == .max, "a burst keeps the whole window")
        // A steady stream: 1 waiting when the sync ended, 4 more only by the deadline.
        window = gather(served: 4, endingAt: 20_000, duringSync: 1)
        #expect(window.deadline == 21_000 && window.target == 5 && window.waitingAtStart == 1)
        arrive(4)
        state.endGather(at: 21_000)
        #expect(state.group.gatherLimit == 500, "a stream halves the window")
        window = gather(served: 5, endingAt: 30_000)
        #expect(window.deadline == 30_500)
        state.endGather(at: 30_500)  // nobody came at all
        #expect(state.group.gatherLimit == 250)
        _ = gather(served: 5, endingAt: 40_000)
        state.endGather(at: 40_250)
        #expect(state.group.gatherLimit == 125, "an eighth of a cycle")
        _ = gather(served: 5, endingAt: 50_000)
        state.endGather(at: 50_125)
        #expect(state.group.gatherLimit == 125, "never shorter than an eighth of a cycle")
        // A gathering a written caller ends early teaches nothing.
        window = gather(served: 5, endingAt: 60_000)
        #expect(window.deadline == 60_125)
        arrive(1, .written)
        state.endGather(at: 60_010)
        #expect(state.group.gatherLimit == 125)
        // The closed loop starts: its 5 are back within the short window, at a burst's rate,
        // each time: the window doubles, then is whole again.
        window = gather(served: 5, endingAt: 70_000)
        arrive(5)
        state.endGather(at: 70_040)
        #expect(state.group.gatherLimit == 250, "a burst doubles the window")
        #expect(gather(served: 5, endingAt: 80_000).deadline == 80_250)
        arrive(5)
        state.endGather(at: 80_040)
        #expect(state.group.gatherLimit == 500)
        #expect(gather(served: 5, endingAt: 90_000).deadline == 90_500)
        arrive(5)
        state.endGather(at: 90_040)
        #expect(state.group.gatherLimit == .max, "half a cycle doubled is a whole one")
        #expect(gather(served: 5, endingAt: 100_000).deadline == 101_000)
    }
}
