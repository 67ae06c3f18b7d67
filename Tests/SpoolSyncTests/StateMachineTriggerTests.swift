import Spool
import Testing
@testable import SpoolSync

/// The dispatch policies that start flushes: count, interval, launch, pause/resume.
@Suite struct StateMachineTriggerTests {
    @Test func countTriggerStartsFlushWhenPendingReachesFlushCount() {
        var configuration = SyncConfiguration.manual
        configuration.flushCount = 5
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.append(4)
        #expect(harness.uploads.isEmpty)
        harness.append(1)
        #expect(harness.uploads == [[0, 1, 2, 3, 4]])
        #expect(harness.committed == 5)
    }

    @Test func countTriggerDoesNothingBeforeStart() {
        var configuration = SyncConfiguration.manual
        configuration.flushCount = 1
        var harness = MachineHarness(configuration)
        harness.append(10)
        #expect(harness.uploads.isEmpty)
    }

    @Test func intervalFlushesEveryIntervalAndRearms() {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(10)
        var harness = MachineHarness(configuration)
        harness.send(.start)
        #expect(harness.timer?.at == .seconds(10))
        harness.append(3)
        harness.advance(to: .milliseconds(9_999))
        #expect(harness.uploads.isEmpty)
        harness.advance(to: .seconds(10))
        #expect(harness.uploads == [[0, 1, 2]])
        #expect(harness.timer?.at == .seconds(20))
        harness.append(1)
        harness.advance(to: .seconds(20))
        #expect(harness.uploads == [[0, 1, 2], [3]])
    }

    @Test func intervalTickWithNothingPendingSendsNothing() {
        var harness = MachineHarness(SyncConfiguration())
        harness.send(.start)
        harness.advance(to: .seconds(100))
        #expect(harness.uploads.isEmpty)
        #expect(harness.timer?.at == .seconds(105))
    }

    @Test(arguments: [Duration.zero, .seconds(-1)])
    func intervalOfZeroOrLessDisablesPeriodicFlushing(interval: Duration) {
        var configuration = SyncConfiguration()
        configuration.flushInterval = interval
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.append(3)
        harness.advance(to: .seconds(3600))
        #expect(harness.timer == nil)
        #expect(harness.uploads.isEmpty)
        let id = harness.flush()
        #expect(harness.uploads == [[0, 1, 2]])
        #expect(harness.reports[id]?.records == 3)
    }

    @Test func intervalBelowTheFloorIsRaisedToIt() {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(1)
        configuration.minimumFlushInterval = .seconds(5)
        var harness = MachineHarness(configuration)
        harness.send(.start)
        #expect(harness.timer?.at == .seconds(5))
        harness.send(.setFlushInterval(.milliseconds(10)))
        #expect(harness.timer?.at == .seconds(5))
        #expect(configuration.effectiveFlushInterval == .seconds(5))
    }

    @Test func changingTheIntervalFlushesAtOnceAndRestartsTheTimer() {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(15)
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.append(2)
        harness.advance(to: .seconds(7))
        #expect(harness.uploads.isEmpty)
        harness.send(.setFlushInterval(.seconds(20)))
        #expect(harness.uploads == [[0, 1]])
        #expect(harness.timer?.at == .seconds(27))
        harness.advance(to: .seconds(15))
        #expect(harness.uploads.count == 1)
    }

    @Test func disablingTheIntervalCancelsTheTimer() {
        var harness = MachineHarness(SyncConfiguration())
        harness.send(.start)
        #expect(harness.timer != nil)
        harness.send(.setFlushInterval(.zero))
        #expect(harness.timer == nil)
    }

    @Test func startSendsWhatAPreviousRunLeft() {
        var harness = MachineHarness(SyncConfiguration(), records: 7)
        #expect(harness.uploads.isEmpty)
        harness.send(.start)
        #expect(harness.uploads == [[0, 1, 2, 3, 4, 5, 6]])
        #expect(harness.committed == 7)
    }

    @Test func startResumesFromTheCommittedOffset() {
        var harness = MachineHarness(SyncConfiguration(), records: 10, committed: 6)
        harness.send(.start)
        #expect(harness.uploads == [[6, 7, 8, 9]])
    }

    @Test func pauseStopsTheTimerAndCountTriggerAndResumeRestartsThem() {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(10)
        configuration.flushCount = 5
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.send(.pause)
        #expect(harness.timer == nil)
        harness.append(3)
        harness.advance(to: .seconds(100))
        harness.append(3)
        #expect(harness.uploads.isEmpty)
        harness.send(.resume)
        // Six records pending ≥ flushCount: resuming flushes at once, and the timer is back.
        #expect(harness.uploads == [[0, 1, 2, 3, 4, 5]])
        #expect(harness.timer?.at == .seconds(110))
        harness.append(1)
        harness.advance(to: .seconds(110))
        #expect(harness.uploads.last == [6])
    }

    @Test func resumeBelowTheCountWaitsForTheTimer() {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .seconds(10)
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.send(.pause)
        harness.append(2)
        harness.advance(to: .seconds(50))
        harness.send(.resume)
        #expect(harness.uploads.isEmpty)
        harness.advance(to: .seconds(60))
        #expect(harness.uploads == [[0, 1]])
    }

    @Test func manualFlushWorksWhilePaused() {
        var harness = MachineHarness(SyncConfiguration(), records: 3)
        harness.send(.start)
        harness.append(2)
        harness.send(.pause)
        let id = harness.flush()
        #expect(harness.reports[id]?.records == 2)
        #expect(harness.committed == 5)
    }

    @Test func pauseLetsTheRequestInFlightFinishAndCommit() {
        var harness = MachineHarness(SyncConfiguration(), records: 120)
        harness.holdUploads = true
        harness.send(.start)
        #expect(harness.uploads.count == 1)
        harness.send(.pause)
        harness.complete()
        #expect(harness.committed == 50)
        #expect(harness.uploads.count == 1)  // no new request while paused
        harness.send(.resume)
        // 70 pending < flushCount 100: the timer will pick it up.
        #expect(harness.uploads.count == 1)
    }

    @Test func intervalChangeWhilePausedTakesEffectOnResume() {
        var harness = MachineHarness(SyncConfiguration())
        harness.send(.start)
        harness.send(.pause)
        harness.append(1)
        harness.send(.setFlushInterval(.seconds(30)))
        #expect(harness.uploads.isEmpty)
        #expect(harness.timer == nil)
        harness.send(.resume)
        #expect(harness.timer?.at == .seconds(30))
    }
}

extension StateMachineTriggerTests {
    @Test func writesNoticedDuringAnEmptyReadAreSentAtTheNextTick() {
        var harness = MachineHarness(SyncConfiguration())
        harness.send(.start)
        var machine = harness.machine
        _ = machine.handle(.flushRequested(id: 0, deadline: nil, retries: 0), now: .zero, jitter: 0)
        // The log writes two records while the read, which started before them, runs.
        _ = machine.handle(.recordsWritten(end: 2), now: .zero, jitter: 0)
        _ = machine.handle(.readCompleted([SyncBatch(records: [], start: 0, end: 0)]), now: .zero, jitter: 0)
        #expect(machine.pending == 2)
        let tick = machine.handle(.timerFired(generation: machine.timerGeneration), now: .seconds(15), jitter: 0)
        #expect(tick.contains { if case .read = $0 { true } else { false } })
    }

    @Test func writesNoticedDuringAnEmptyReadReachingTheCountContinueTheDrain() {
        var configuration = SyncConfiguration.manual  // periodic flushing off
        configuration.flushCount = 2
        var machine = SyncStateMachine(configuration: configuration, committed: 0, pending: 0)
        _ = machine.handle(.start, now: .zero, jitter: 0)
        _ = machine.handle(.flushRequested(id: 0, deadline: nil, retries: 0), now: .zero, jitter: 0)
        // Two records are written while the read, which started before them, runs.
        #expect(machine.handle(.recordsWritten(end: 2), now: .zero, jitter: 0).isEmpty)
        let done = machine.handle(.readCompleted([SyncBatch(records: [], start: 0, end: 0)]), now: .zero, jitter: 0)
        #expect(done.contains { if case .finishFlush(id: 0, _) = $0 { true } else { false } })
        #expect(done.contains { if case .read = $0 { true } else { false } })
    }

    @Test func anEmptyReadWithNoNewWriteDoesNotReadAgain() {
        var configuration = SyncConfiguration.manual
        configuration.flushCount = 2
        // The consumer said 5 were pending, but the read finds none (not readable yet, say).
        var machine = SyncStateMachine(configuration: configuration, committed: 0, pending: 5)
        #expect(machine.handle(.start, now: .zero, jitter: 0).contains { if case .read = $0 { true } else { false } })
        let done = machine.handle(.readCompleted([SyncBatch(records: [], start: 0, end: 0)]), now: .zero, jitter: 0)
        #expect(!done.contains { if case .read = $0 { true } else { false } })
        #expect(machine.isIdle)
    }
}
