import Spool
import Testing
@testable import SpoolSync

/// Several requests in flight: rounds answered in any order, commits through the longest
/// accepted prefix only, and every failure policy inside a round.
@Suite struct StateMachineRoundTests {
    static let unavailable = SyncError(.serverError, "the server failed", status: 503)
    static let tooLarge = SyncError(.payloadTooLarge, "too big", status: 413)

    /// Manual flushes, batches of 10, `concurrency` requests in flight at most.
    static func configuration(_ concurrency: SyncConfiguration.Concurrency = .fixed(4)) -> SyncConfiguration {
        var configuration = SyncConfiguration.manual
        configuration.maxBatchCount = 10
        configuration.concurrency = concurrency
        return configuration
    }

    @Test func aRoundSendsUpToTheLimitAndCommitsOnceAllAreAccepted() {
        var harness = MachineHarness(Self.configuration(), records: 100)
        harness.holdUploads = true
        let id = harness.flush()
        #expect(harness.inFlightFirsts == [0, 10, 20, 30])
        // Answered out of order: nothing commits until the first is accepted.
        harness.complete(first: 30)
        harness.complete(first: 10)
        harness.complete(first: 20)
        #expect(harness.commits.isEmpty)
        harness.complete(first: 0)
        #expect(harness.commits == [40])  // the accepted prefix, in one commit
        #expect(harness.inFlightFirsts == [40, 50, 60, 70])
        while !harness.inFlight.isEmpty { harness.complete(first: harness.inFlightFirsts.last) }
        #expect(harness.commits == [40, 80, 100])
        #expect(harness.reports[id]?.records == 100)
        #expect(harness.reports[id]?.batches == 10)
        #expect(harness.results[id]?.filter { $0.name == "good" }.count == 10)  // one result per request
        #expect(harness.peakInFlight == 4)
        #expect(harness.machine.stats.requests == 10)
    }

    @Test func aFailureInTheMiddleOfARoundCommitsOnlyThePrefixBeforeIt() {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.holdUploads = true
        let id = harness.flush(retries: 1)
        harness.complete(first: 0)
        harness.complete(first: 20)
        harness.complete(first: 30)
        #expect(harness.commits.isEmpty)  // 10 is still in flight: nothing after 0 may commit
        harness.complete(.retry(Self.unavailable), first: 10)
        #expect(harness.commits == [10])  // never past the failed batch, though 20 and 30 were accepted
        #expect(harness.committed == 10)
        #expect(harness.backoff != nil)
        // After the backoff the retry reads again from the offset: 10, 20, 30 (sent again).
        harness.advance(to: .seconds(120))
        #expect(harness.inFlightFirsts == [10, 20, 30])
        while !harness.inFlight.isEmpty { harness.complete() }
        #expect(harness.commits == [10, 40])
        #expect(harness.reports[id]?.records == 40)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.machine.stats.retries == 1)
        #expect(harness.machine.stats.requests == 7)
    }

    @Test func everyFailedRequestIsCountedButOnlyTheFirstIsRetried() {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.holdUploads = true
        let id = harness.flush()
        harness.complete(.retry(Self.unavailable), first: 30)
        harness.complete(.retry(Self.unavailable), first: 10)
        harness.complete(first: 0)
        harness.complete(first: 20)
        #expect(harness.commits == [10])
        #expect(harness.machine.stats.failures[.serverError] == 2)
        #expect(harness.reports[id]?.failure?.status == 503)
        #expect(harness.reports[id]?.records == 10)
    }

    @Test func tooLargeInARoundSplitsThatBatchAndRemembersTheCeiling() {
        var harness = MachineHarness(Self.configuration(.fixed(2)), records: 40)
        harness.respond = { $0.records.count > 5 ? .tooLarge(Self.tooLarge) : .accepted }
        let id = harness.flush()
        // Round 1: [0..<10] and [10..<20] both 413; their halves fit. From then on the reads
        // are cut at the ceiling (half the records and half the bytes of the refused batch),
        // not walked down from 10 again.
        #expect(harness.uploads.prefix(6).map(\.count) == [10, 10, 5, 5, 5, 5])
        #expect(harness.uploads.dropFirst(6).allSatisfy { $0.count <= 5 })
        #expect(harness.machine.stats.failures[.payloadTooLarge] == 2)
        #expect(harness.committed == 40)
        #expect(harness.reports[id]?.records == 40)
        #expect(harness.machine.stats.splits == 2)
        #expect(harness.machine.batchLimits.count == 5)
    }

    @Test func theCeilingGrowsBackAfterManyAcceptedBatches() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 10)
        harness.respond = { $0.records.count > 5 ? .tooLarge(Self.tooLarge) : .accepted }
        harness.flush()
        #expect(harness.machine.batchLimits.count == 5)
        harness.respond = { _ in .accepted }
        harness.append(Int(SyncStateMachine.ceilingGrowthBatches) * 10)
        harness.flush()
        #expect(harness.machine.batchLimits.count > 5)
    }

    @Test func aRefusedRecordInARoundIsDeadLetteredInOrder() {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.respond = { batch in
            batch.records.contains { $0.seq == 23 } ? .rejected(SyncError(.rejected, "bad event", status: 400)) : .accepted
        }
        let id = harness.flush()
        #expect(harness.deadLettered == [23])
        #expect(harness.committed == 40)
        #expect(harness.reports[id]?.records == 39)
        #expect(harness.reports[id]?.deadLettered == 1)
        // Commits move forward only, and the one at 24 (past the dead letter) comes after the
        // commit at 20 (the prefix before it).
        #expect(harness.commits == harness.commits.sorted())
        #expect(harness.commits.contains(20) && harness.commits.contains(24))
    }

    @Test func stopWithSeveralInFlightCommitsNothingTheyCarry() {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.holdUploads = true
        let id = harness.flush()
        harness.complete(first: 10)
        harness.send(.stop)
        #expect(harness.reports[id]?.failure?.code == .stopped)
        harness.complete(first: 0)
        harness.complete(first: 20)
        harness.complete(first: 30)
        #expect(harness.commits.isEmpty)
    }

    @Test func aDeadlineAnswersTheFlushWhileARoundIsInFlightAndTheRoundStillCommits() throws {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.holdUploads = true
        let id = harness.flush(deadline: .seconds(5))
        #expect(harness.inFlight.count == 4)
        harness.advance(to: .seconds(5))
        let report = try #require(harness.reports[id])
        #expect(report.deadlineReached)
        #expect(report.records == 0)
        while !harness.inFlight.isEmpty { harness.complete() }
        #expect(harness.committed == 40)
        #expect(harness.machine.stats.records == 40)
    }

    /// `--retries N` counts retries of one upload: a server that fails one request in three
    /// (never the same upload twice) does not end a flush with 1 retry allowed.
    @Test func retriesCountPerUploadNotPerFlush() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 300)
        var count = 0
        harness.respond = { _ in
            count += 1
            return count % 3 == 0 ? .retry(Self.unavailable) : .accepted
        }
        let id = harness.flush(retries: 1)
        for _ in 0..<100 where harness.reports[id] == nil { harness.advance(to: harness.now + .seconds(120)) }
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.committed == 300)
        #expect(harness.machine.stats.retries > 1)
    }

    @Test func aFlushWithRetriesStillEndsWhenOneUploadFailsTooOften() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 30)
        harness.respond = { $0.records[0].seq == 10 ? .retry(Self.unavailable) : .accepted }
        let id = harness.flush(retries: 2)
        for _ in 0..<10 where harness.reports[id] == nil { harness.advance(to: harness.now + .seconds(120)) }
        #expect(harness.reports[id]?.failure?.status == 503)
        #expect(harness.committed == 10)
        #expect(harness.uploads.filter { $0.first == 10 }.count == 3)  // the first try and 2 retries
    }

    /// A round that delivered batches before its failure made progress: the backoff starts
    /// over instead of growing toward its cap round after round (one failed request in every
    /// round of 4 took a sync from seconds to minutes). Every fifth request fails: with rounds
    /// of 4 or fewer, no batch fails twice in a row.
    @Test func aRoundWithProgressRestartsTheBackoff() {
        var harness = MachineHarness(Self.configuration(), records: 600)
        var count = 0
        harness.respond = { _ in
            count += 1
            return count % 5 == 0 ? .retry(Self.unavailable) : .accepted
        }
        let id = harness.flush(retries: 5)
        var longest: Duration = .zero
        for _ in 0..<1_000 where harness.reports[id] == nil {
            if let backoff = harness.backoff { longest = max(longest, backoff.at - harness.now) }
            harness.advance(to: harness.now + .seconds(1))
        }
        #expect(harness.committed == 600)
        #expect(harness.reports[id]?.failure == nil)
        #expect(longest <= SyncConfiguration().backoff.base * 2)  // never past the second step
    }

    @Test func adaptiveConcurrencyGrowsOnHealthyRoundsAndHalvesOn503() {
        var harness = MachineHarness(Self.configuration(.adaptive(max: 8)), records: 2000)
        var overloaded = false
        harness.respond = { _ in overloaded ? .retry(Self.unavailable) : .accepted }
        harness.flush()
        #expect(harness.machine.concurrency.limit == 8)  // 1, 2, 4, 8 on healthy rounds
        #expect(harness.machine.stats.peakConcurrency == 8)
        overloaded = true
        harness.append(100)
        harness.flush()
        #expect(harness.machine.concurrency.limit == 4)
    }
}
