import Spool
import Testing
@testable import SpoolSync

/// Manual flushes, per-batch results, deadlines, and what failures do to a drain.
@Suite struct StateMachineFlushTests {
    static let unavailable = SyncError(.serverError, "the server failed", status: 503, overloaded: true)

    @Test func manualFlushDrainsEverythingAndReports() {
        var harness = MachineHarness(.manual, records: 120)
        let id = harness.flush()
        #expect(harness.uploads.map(\.count) == [50, 50, 20])
        #expect(harness.commits == [50, 100, 120])
        let report = harness.reports[id]
        #expect(report?.batches == 3)
        #expect(report?.records == 120)
        #expect(report?.bytes == 1200)
        #expect(report?.failure == nil)
        #expect(report?.deadlineReached == false)
        #expect(harness.machine.stats.pending == 0)
    }

    @Test func flushWithNothingPendingReportsNoData() {
        var harness = MachineHarness(.manual)
        let id = harness.flush()
        #expect(harness.uploads.isEmpty)
        #expect(harness.results[id]?.map(\.name) == ["noData"])
        #expect(harness.reports[id]?.batches == 0)
    }

    @Test func manualFlushEndsAtTheFirstFailedUpload() {
        var harness = MachineHarness(.manual, records: 120)
        harness.respond = { batch in batch.records[0].seq == 50 ? .retry(Self.unavailable) : .accepted }
        let id = harness.flush()
        #expect(harness.uploads.map(\.count) == [50, 50])
        #expect(harness.committed == 50)
        let report = harness.reports[id]
        #expect(report?.batches == 1)
        #expect(report?.failure?.code == .serverError)
        #expect(report?.failure?.status == 503)
        // Nobody wants more (not started): no automatic retry is scheduled.
        #expect(harness.backoff == nil)
        #expect(harness.machine.retryOwed)
    }

    @Test func perBatchResultsReportEveryRequest() {
        var harness = MachineHarness(.manual, records: 120)
        let good = harness.flush()
        #expect(harness.results[good]?.map(\.name) == ["good", "good", "good", "noData"])

        harness.append(60)
        harness.respond = { batch in batch.records[0].seq == 170 ? .retry(Self.unavailable) : .accepted }
        let failing = harness.flush()
        #expect(harness.results[failing]?.map(\.name) == ["good", "error(serverError)"])
    }

    @Test func flushRetriesInsideTheFlushWhenAsked() {
        var harness = MachineHarness(.manual, records: 10)
        harness.failFirst(2, with: Self.unavailable)
        let id = harness.flush(retries: 3)
        #expect(harness.reports[id] == nil)
        #expect(harness.backoff?.at == .milliseconds(100))
        harness.advance(to: .milliseconds(100))
        #expect(harness.backoff?.at == .milliseconds(300))  // 100 ms + a 200 ms ceiling with jitter 1
        harness.advance(to: .milliseconds(300))
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.reports[id]?.records == 10)
        #expect(harness.uploads == Array(repeating: Array(0...9), count: 3))
        #expect(harness.results[id]?.map(\.name) == ["error(serverError)", "error(serverError)", "good", "noData"])
    }

    @Test func flushGivesUpWhenItsRetriesRunOut() {
        var harness = MachineHarness(.manual, records: 10)
        harness.respond = { _ in .retry(Self.unavailable) }
        let id = harness.flush(retries: 1)
        harness.advance(to: .seconds(60))
        #expect(harness.uploads.count == 2)
        #expect(harness.reports[id]?.failure?.code == .serverError)
        #expect(harness.committed == 0)
    }

    @Test func deadlineCutsRequestsToTheTimeLeftAndStopsBelowTheMinimum() throws {
        var harness = MachineHarness(.manual, records: 200)  // four batches
        harness.holdUploads = true
        let id = harness.flush(deadline: .seconds(100))  // requestTimeout is 30 s
        harness.now = .seconds(75)
        harness.complete()  // 25 s left < 30 s: the second request starts, cut to 25 s
        try #require(harness.uploads.count == 2)
        harness.now = .milliseconds(99_500)
        harness.complete()  // 0.5 s left < the 1 s minimum: no third request
        #expect(harness.uploads.count == 2)
        #expect(harness.timeouts == [.seconds(30), .seconds(25)])
        #expect(harness.committed == 100)  // both batches committed, none half
        let report = harness.reports[id]
        #expect(report?.deadlineReached == true)
        #expect(report?.batches == 2)
        #expect(report?.failure == nil)
    }

    @Test func budgetShorterThanTheRequestTimeoutStillSends() {
        var harness = MachineHarness(.manual, records: 10)
        harness.now = .seconds(10)
        let id = harness.flush(deadline: .seconds(30))  // 20 s left; requestTimeout is 30 s
        #expect(harness.uploads == [Array(0...9)])
        #expect(harness.timeouts == [.seconds(20)])
        #expect(harness.reports[id]?.records == 10)
        #expect(harness.reports[id]?.deadlineReached == false)
    }

    @Test func deadlineTooCloseStartsNothing() {
        var harness = MachineHarness(.manual, records: 10)
        harness.now = .seconds(10)
        let id = harness.flush(deadline: .milliseconds(10_999))  // just under the 1 s minimum
        #expect(harness.uploads.isEmpty)
        #expect(harness.reports[id]?.deadlineReached == true)
    }

    @Test func flushJoiningARequestInFlightIsAnsweredAtItsDeadline() throws {
        // The iOS recipe: the timer's request is in flight with the full 30 s timeout when the
        // app goes to the background and flushes within 5 s.
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.holdUploads = true
        harness.send(.start)  // sends on launch
        try #require(harness.uploads.count == 1)
        harness.send(.pause)
        harness.now = .seconds(1)
        let id = harness.flush(deadline: .seconds(6))
        harness.advance(to: .milliseconds(5_999))
        #expect(harness.reports[id] == nil)
        harness.advance(to: .seconds(6))
        let report = try #require(harness.reports[id])
        #expect(report.deadlineReached)
        #expect(report.records == 0)
        // The request goes on; accepted later, it is committed all the same.
        harness.complete()
        #expect(harness.committed == 10)
        #expect(harness.uploads.count == 1)
    }

    /// A retry reads again from the committed offset: records that expired (or were dropped)
    /// during the backoff are skipped, never sent from the failed batch kept in memory.
    @Test func aRetryReadsAgainSoRecordsExpiredDuringTheBackoffAreNotSent() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failFirst(1, with: Self.unavailable)
        harness.jitter = 0.5
        harness.send(.start)
        #expect(harness.uploads == [Array(0...9)])
        harness.skipped = Set(0..<5)  // expired while the worker backed off
        harness.advance(to: .seconds(1))
        #expect(harness.uploads == [Array(0...9), Array(5...9)])
        #expect(harness.committed == 10)
    }

    /// A backoff of its own is skipped by a manual flush; a server's Retry-After is not.
    @Test func aManualFlushWaitsForTheServersRetryAfter() throws {
        var harness = MachineHarness(.manual, records: 10)
        harness.failFirst(1, with: SyncError(.rateLimited, "slow down", status: 429, retryAfter: .seconds(30)))
        let first = harness.flush()
        #expect(harness.reports[first]?.failure?.code == .rateLimited)
        harness.now = .seconds(1)
        let hurried = harness.flush(deadline: .seconds(20))  // ends before the server's time
        #expect(harness.reports[hurried]?.failure?.code == .rateLimited)
        let patient = harness.flush()
        #expect(harness.uploads.count == 1)  // nothing sent before the 30 s
        harness.advance(to: .milliseconds(29_999))
        #expect(harness.uploads.count == 1)
        harness.advance(to: .seconds(30))
        #expect(harness.uploads.count == 2)
        #expect(harness.reports[patient]?.records == 10)
        #expect(harness.committed == 10)
        // Accepted: the server's wait is over; the next flush starts at once.
        harness.append(5)
        let later = harness.flush()
        #expect(harness.uploads.count == 3)
        #expect(harness.reports[later]?.records == 5)
    }

    @Test func retryThatCannotFinishBeforeTheDeadlineEndsTheFlush() {
        var harness = MachineHarness(.manual, records: 10)
        harness.respond = { _ in .retry(SyncError(.rateLimited, "slow down", status: 429, retryAfter: .seconds(120))) }
        let id = harness.flush(deadline: .seconds(100), retries: 5)
        #expect(harness.uploads.count == 1)
        #expect(harness.reports[id]?.failure?.code == .rateLimited)
    }

    @Test func aRunningWorkerRetriesWithBackoffUntilDelivered() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failFirst(3, with: Self.unavailable)
        harness.jitter = 0.5
        harness.send(.start)
        #expect(harness.backoff?.at == .milliseconds(50))  // ceiling 100 ms, jitter 0.5
        harness.advance(to: .milliseconds(50))
        #expect(harness.backoff?.at == .milliseconds(150))  // ceiling 200 ms
        harness.advance(to: .milliseconds(150))
        #expect(harness.backoff?.at == .milliseconds(350))  // ceiling 400 ms
        harness.advance(to: .milliseconds(400))
        #expect(harness.committed == 10)
        #expect(harness.uploads.count == 4)
        #expect(Set(harness.uploads).count == 1)  // the same batch each time
        #expect(harness.machine.stats.retries == 3)
        #expect(harness.machine.stats.failures[.serverError] == 3)
    }

    @Test func retryAfterLongerThanTheBackoffIsHonoured() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failFirst(1, with: SyncError(.rateLimited, "slow down", status: 429, retryAfter: .seconds(42)))
        harness.send(.start)
        #expect(harness.backoff?.at == .seconds(42))
        // Timer ticks during the backoff do not start a flush.
        harness.append(1)
        harness.advance(to: .seconds(41))
        #expect(harness.uploads.count == 1)
        harness.advance(to: .seconds(42))
        #expect(harness.committed == 11)
    }

    @Test func countTriggerWaitsOutTheBackoff() {
        var configuration = SyncConfiguration()
        configuration.flushCount = 5
        configuration.flushInterval = .zero
        var harness = MachineHarness(configuration)
        harness.send(.start)
        harness.respond = { _ in .retry(Self.unavailable) }
        harness.append(5)
        #expect(harness.uploads.count == 1)
        harness.append(5)
        #expect(harness.uploads.count == 1)  // backing off: no new request
    }

    @Test func manualFlushDuringABackoffStartsAtOnce() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failFirst(1, with: Self.unavailable)
        harness.send(.start)
        #expect(harness.backoff != nil)
        let id = harness.flush()
        #expect(harness.reports[id]?.records == 10)
        harness.advance(to: .seconds(10))  // the stale backoff wake does nothing
        #expect(harness.uploads.count == 2)
    }

    @Test func pausedWorkerOwesTheRetryAndPaysItOnResume() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failFirst(1, with: Self.unavailable)
        harness.send(.start)
        harness.send(.pause)
        harness.advance(to: .seconds(5))  // the backoff wake finds the worker paused
        #expect(harness.uploads.count == 1)
        harness.send(.resume)
        #expect(harness.committed == 10)
    }

    @Test func tooLargeSplitsTheBatchUntilItFits() {
        var harness = MachineHarness(.manual, records: 8)
        harness.respond = { batch in batch.records.count > 2 ? .tooLarge(SyncError(.payloadTooLarge, "too big", status: 413)) : .accepted }
        let id = harness.flush()
        // The second 413 lowers the ceiling to 2 records: the unsent half [4, 5, 6, 7] is read
        // again under it instead of walking into a third 413.
        #expect(harness.uploads == [[0, 1, 2, 3, 4, 5, 6, 7], [0, 1, 2, 3], [0, 1], [2, 3], [4, 5], [6, 7]])
        #expect(harness.commits == [2, 4, 6, 8])
        #expect(harness.reports[id]?.records == 8)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.machine.stats.splits == 2)
        #expect(harness.deadLettered.isEmpty)
    }

    @Test func aLoneRecordStillTooLargeIsDeadLettered() {
        var harness = MachineHarness(.manual, records: 3)
        harness.respond = { batch in
            batch.records.contains { $0.seq == 1 } ? .tooLarge(SyncError(.payloadTooLarge, "too big", status: 413)) : .accepted
        }
        let id = harness.flush()
        #expect(harness.deadLettered == [1])
        #expect(harness.committed == 3)
        #expect(harness.reports[id]?.deadLettered == 1)
        #expect(harness.reports[id]?.records == 2)
    }

    @Test func poisonRecordIsDeadLetteredAndTheRestArriveInOrder() {
        var harness = MachineHarness(.manual, records: 50)
        harness.respond = { batch in
            batch.records.contains { $0.seq == 17 } ? .rejected(SyncError(.rejected, "bad event", status: 400)) : .accepted
        }
        let id = harness.flush()
        #expect(harness.deadLettered == [17])
        #expect(harness.committed == 50)
        // Every accepted upload is committed in order; together they hold every seq but 17, once.
        var accepted: [UInt64] = []
        for upload in harness.uploads where !upload.contains(17) { accepted += upload }
        #expect(accepted == Array(0..<50).filter { $0 != 17 })
        #expect(harness.reports[id]?.deadLettered == 1)
        #expect(harness.reports[id]?.records == 49)
        #expect(harness.machine.stats.deadLettered == 1)
        #expect(harness.machine.stats.failures[.rejected] == 7)  // the halves holding 17: 50, 25, 13, 6, 3, 2, 1
    }

    @Test func refusedRecordsAreSkippedWhenDeadLetteringIsOff() {
        var configuration = SyncConfiguration.manual
        configuration.deadLetterEnabled = false
        var harness = MachineHarness(configuration, records: 2)
        harness.respond = { batch in batch.records.contains { $0.seq == 0 } ? .rejected(SyncError(.rejected, "no", status: 422)) : .accepted }
        let id = harness.flush()
        #expect(harness.deadLettered.isEmpty)
        #expect(harness.committed == 2)
        #expect(harness.reports[id]?.deadLettered == 1)
    }

    @Test func commitFailureStopsTheFlushWithoutReuploading() {
        var harness = MachineHarness(SyncConfiguration(), records: 120)
        harness.failCommits = 1
        let id = harness.flush()
        // The next batch went out while the first was committed (one in flight, in order);
        // the failed commit abandons it.
        #expect(harness.uploads.count == 2)
        #expect(harness.reports[id]?.failure?.code == .commitFailed)
        #expect(harness.results[id]?.map(\.name) == ["error(commitFailed)"])
        #expect(harness.backoff == nil)  // no automatic loop
        #expect(harness.uploads.count == 2)
        // The next flush starts again from the offset on disk.
        let next = harness.flush()
        #expect(harness.uploads[2] == harness.uploads[0])
        #expect(harness.reports[next]?.records == 120)
    }

    @Test func commitFailureInARunningWorkerWaitsForTheNextTrigger() {
        var harness = MachineHarness(SyncConfiguration(), records: 10)
        harness.failCommits = 1
        harness.send(.start)
        #expect(harness.uploads.count == 1)
        #expect(harness.backoff == nil)
        harness.advance(to: .seconds(15))  // the timer retries from the offset on disk
        #expect(harness.uploads.count == 2)
        #expect(harness.committed == 10)
    }

    @Test func readFailureEndsTheFlush() {
        var harness = MachineHarness(.manual, records: 10)
        harness.failReads = 1
        let id = harness.flush()
        #expect(harness.uploads.isEmpty)
        #expect(harness.reports[id]?.failure?.code == .readFailed)
    }

    @Test func skippedRangesAreCommittedWithoutARequest() {
        var harness = MachineHarness(.manual, records: 0)
        harness.machine = SyncStateMachine(configuration: .manual, committed: 0, pending: 5)
        let id = 0
        let actions = harness.machine.handle(.flushRequested(id: id, deadline: nil, retries: 0), now: .zero, jitter: 0)
        guard case .read = actions.first else { Issue.record("expected a read"); return }
        // The read found only an expired range 0..<5.
        let next = harness.machine.handle(.readCompleted([SyncBatch(records: [], start: 0, end: 5)]), now: .zero, jitter: 0)
        guard case .commit(let end) = next.first else { Issue.record("expected a commit"); return }
        #expect(end == 5)
    }

    @Test func flushesJoinTheDrainInProgress() {
        var harness = MachineHarness(.manual, records: 100)
        harness.holdUploads = true
        let first = harness.flush()
        let second = harness.flush()
        #expect(harness.uploads.count == 1)
        harness.complete()
        harness.complete()
        #expect(harness.reports[first]?.records == 100)
        #expect(harness.reports[second]?.records == 100)
    }

    @Test func stopEndsWaitingFlushesAndRefusesNewOnes() {
        var harness = MachineHarness(.manual, records: 100)
        harness.holdUploads = true
        let waiting = harness.flush()
        harness.send(.stop)
        #expect(harness.reports[waiting]?.failure?.code == .stopped)
        harness.complete()
        #expect(harness.committed == 0)  // the abandoned upload is not committed
        let late = harness.flush()
        #expect(harness.reports[late]?.failure?.code == .stopped)
    }

    @Test func oneRequestInFlightAtATime() {
        var configuration = SyncConfiguration()
        configuration.flushCount = 1
        var harness = MachineHarness(configuration)
        harness.holdUploads = true
        harness.send(.start)
        harness.append(1)
        harness.append(1)
        harness.flush()
        harness.advance(to: .seconds(60))
        #expect(harness.uploads.count == 1)
        harness.complete()
        #expect(harness.uploads.count == 2)
        #expect(harness.peakInFlight == 1)  // the default, `.fixed(1)`: strict order
    }
}
