import Spool
import Testing
@testable import SpoolSync

/// Several requests in flight through a sliding window, on a manual clock: freed slots
/// refilled at once, commits through the longest accepted prefix only, the window's bound, and
/// every failure policy inside the window.
@Suite struct StateMachineWindowTests {
    static let unavailable = SyncError(.serverError, "the server failed", status: 503, overloaded: true)
    static let internalError = SyncError(.serverError, "the server failed", status: 500)
    static let tooLarge = SyncError(.payloadTooLarge, "too big", status: 413)
    static let forbidden = SyncError(.rejected, "permission denied", status: 403)

    /// Manual flushes, batches of 10, `concurrency` requests in flight at most.
    static func configuration(_ concurrency: SyncConfiguration.Concurrency = .fixed(4)) -> SyncConfiguration {
        var configuration = SyncConfiguration.manual
        configuration.maxBatchCount = 10
        configuration.concurrency = concurrency
        return configuration
    }

    @Test func aSlotFreedByAnAnswerIsRefilledAtOnce() {
        var harness = MachineHarness(Self.configuration(), records: 100)
        harness.holdUploads = true
        let id = harness.flush()
        #expect(harness.inFlightFirsts == [0, 10, 20, 30])
        // Answered out of order: each answer sends the next batch, nothing waits for the others.
        harness.complete(first: 30)
        #expect(harness.inFlightFirsts == [0, 10, 20, 40])
        harness.complete(first: 10)
        #expect(harness.inFlightFirsts == [0, 20, 40, 50])
        #expect(harness.commits.isEmpty)  // 0 is still in flight
        harness.complete(first: 0)
        #expect(harness.commits == [20])  // the accepted prefix, in one commit
        while !harness.inFlight.isEmpty { harness.complete(first: harness.inFlightFirsts.last) }
        #expect(harness.committed == 100)
        #expect(harness.commits == harness.commits.sorted())
        #expect(harness.reports[id]?.records == 100)
        #expect(harness.reports[id]?.batches == 10)
        #expect(harness.results[id]?.filter { $0.name == "good" }.count == 10)  // one result per request
        #expect(harness.peakInFlight == 4)
        #expect(harness.machine.stats.requests == 10)
        #expect(harness.machine.stats.peakInFlight == 4)
    }

    /// One slow answer holds one slot, not all of them: the others keep flowing until what
    /// waits behind it reaches the window's bound.
    @Test func oneSlowAnswerAmongFastOnesKeepsTheOthersFlowing() {
        var configuration = Self.configuration()
        configuration.maxBatchBytes = 1024
        configuration.maxWindowBytes = 4096  // records of ~9 bytes: about 45 batches of 10
        var harness = MachineHarness(configuration, records: 1_000)
        harness.holdUploads = true
        let id = harness.flush()
        // The batch at 0 is slow; every other answer comes at once.
        while let other = harness.inFlightFirsts.first(where: { $0 != 0 }) { harness.complete(first: other) }
        #expect(harness.inFlightFirsts == [0])
        #expect(harness.commits.isEmpty)
        let sent = harness.uploads.count
        #expect(sent > 4)  // far past one round of 4
        // At the bound: nothing more is read or sent until the head is answered.
        let held = harness.machine.window.held.bytes
        #expect(held > 4096 - 1024 && held <= 4096)
        harness.complete(first: 0)
        #expect(harness.commits.first == UInt64(sent) * 10)  // everything answered, in one commit
        while !harness.inFlight.isEmpty { harness.complete() }
        #expect(harness.committed == 1_000)
        #expect(harness.reports[id]?.records == 1_000)
    }

    @Test func outOfOrderAnswersCommitOnlyTheAcceptedPrefix() {
        var harness = MachineHarness(Self.configuration(.fixed(3)), records: 30)
        harness.holdUploads = true
        harness.flush()
        harness.complete(first: 20)
        #expect(harness.commits.isEmpty)
        harness.complete(first: 0)
        #expect(harness.commits == [10])  // not past 10, still in flight
        harness.complete(first: 10)
        #expect(harness.commits == [10, 30])
    }

    /// A failure among successes (issue 34): the failed batch is retried on its own after its
    /// own backoff while the rest of the window goes on, and the offset waits for it.
    @Test func aFailureInTheMiddleOfTheWindowIsRetriedAloneAndTheOffsetWaitsForIt() {
        var harness = MachineHarness(Self.configuration(), records: 60)
        harness.holdUploads = true
        let id = harness.flush(retries: 1)
        harness.complete(first: 0)
        #expect(harness.inFlightFirsts == [10, 20, 30, 40])
        harness.complete(.retry(Self.unavailable), first: 10)
        #expect(harness.backoff == nil)  // the worker does not back off as a whole
        #expect(harness.inFlightFirsts == [20, 30, 40, 50])  // the freed slot went to the next batch
        harness.complete(first: 20)
        harness.complete(first: 30)
        #expect(harness.commits == [10])  // never past the failed batch, though 20 and 30 were accepted
        #expect(harness.machine.stats.retries == 0)  // not retried yet: it waits for its own backoff
        harness.advance(to: .seconds(1))
        #expect(harness.inFlightFirsts == [40, 50, 10])  // retried alone
        harness.complete(first: 10)
        #expect(harness.commits == [10, 40])
        harness.drain()
        #expect(harness.committed == 60)
        #expect(harness.reports[id]?.records == 60)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.machine.stats.retries == 1)
        #expect(harness.machine.stats.requests == 7)
        #expect(harness.uploads.filter { $0.first == 20 }.count == 1)  // nothing after it was sent twice
    }

    /// A `Retry-After` on one answer among accepted ones (issue 34) binds its batch, not the
    /// window: that batch waits the time asked, alone, while the freed slot goes on; nothing
    /// in flight is abandoned or sent twice, and the offset waits for it. (Read as "everything
    /// waits", it halted the window and re-sent what was in flight: 56,350 repeats in a demo
    /// of 200,000 events against a collector that answered its ninth request so.)
    @Test func aRetryAfterAmongAcceptedAnswersBindsItsBatchNotTheWindow() {
        var harness = MachineHarness(Self.configuration(), records: 100)
        harness.holdUploads = true
        let id = harness.flush(retries: 1)
        harness.complete(.retry(SyncError(.serverError, "the server failed", status: 503, retryAfter: .seconds(1))), first: 10)
        #expect(harness.backoff == nil)  // the worker does not back off as a whole
        #expect(harness.inFlightFirsts == [0, 20, 30, 40])
        harness.complete(first: 0)
        harness.complete(first: 20)
        #expect(harness.commits == [10])  // never past the batch that waits
        harness.advance(to: .milliseconds(999))
        #expect(harness.uploads.filter { $0.first == 10 }.count == 1)  // not before the time asked
        harness.advance(to: .seconds(1))
        harness.complete(first: 30)  // the first slot freed goes to it, the oldest batch unsent
        #expect(harness.inFlightFirsts.last == 10)
        harness.drain()
        #expect(harness.committed == 100)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.uploads.filter { $0.first == 10 }.count == 2)
        #expect(harness.uploads.count == 11)  // every other batch went once
    }

    /// A server that fails every request and asks for a wait: once the retry budget is spent
    /// (ten failures, half the bucket) the window halts and the whole worker waits, never
    /// sooner than `Retry-After`, as it always did.
    @Test func aServerFailingEveryRequestWithRetryAfterHaltsTheWholeWorker() {
        var harness = MachineHarness(Self.configuration(), records: 1_000)
        let wait = SyncError(.serverError, "the server failed", status: 503, retryAfter: .seconds(5), overloaded: true)
        harness.respond = { _ in .retry(wait) }
        let id = harness.flush(retries: 100)
        // The budget's half (10 failures retried alone), and the requests already out then.
        let sent = harness.uploads.count
        #expect(sent >= 10 && sent <= 13)
        #expect(harness.machine.halted)
        harness.advance(to: .milliseconds(4_999))
        #expect(harness.uploads.count == sent)  // nothing goes out before the server's time
        #expect(harness.commits.isEmpty)
        harness.respond = { _ in .accepted }
        harness.drain()
        #expect(harness.committed == 1_000)
        #expect(harness.reports[id]?.failure == nil)
    }

    /// A batch that fails among accepted ones waits about a round trip before it goes again,
    /// not the backoff's first step (100 ms): the server took the requests beside it.
    @Test func aFailureAmongAcceptedAnswersIsRetriedAfterAboutARoundTrip() throws {
        var configuration = Self.configuration()
        configuration.hedging = false  // no hedge wakes: the only wake is the retry's
        var harness = MachineHarness(configuration, records: 1_000)
        harness.holdUploads = true
        harness.flush(retries: 1)
        for _ in 0..<40 {
            harness.advance(to: harness.now + .milliseconds(2))
            harness.complete()
        }
        let roundTrip = try #require(harness.machine.concurrency.average)
        #expect(roundTrip > .milliseconds(4) && roundTrip < .milliseconds(12))  // 4 in flight, one answer every 2 ms
        let first = harness.inFlightFirsts[0]
        harness.complete(.retry(Self.unavailable), first: first)
        let wake = try #require(harness.retryWake)
        // jitter 1: the whole first step, which is the round trip (to the backoff's whole ns)
        #expect(abs((wake - harness.now - roundTrip).seconds) < 1e-6)
        harness.advance(to: wake)
        harness.complete(first: harness.inFlightFirsts[0])  // the slot it waits for
        #expect(harness.inFlightFirsts.last == first)
        harness.drain()
        #expect(harness.committed == 1_000)
    }

    /// With one request in flight, batches reach the server in seq order, failures included:
    /// the window halts and goes back, as it always did.
    @Test func oneInFlightKeepsGoingBackAfterAFailure() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 30)
        let id = harness.flush(retries: 1)
        harness.failFirst(1, with: Self.unavailable)
        harness.advance(to: .seconds(120))
        #expect(harness.committed == 30)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.uploads.map { $0.first ?? 0 } == harness.uploads.map { $0.first ?? 0 }.sorted())
    }

    @Test func everyFailedRequestIsCountedButNoneRetriedWhenTheFlushEnds() {
        var harness = MachineHarness(Self.configuration(), records: 40)
        harness.holdUploads = true
        let id = harness.flush()
        harness.complete(.retry(Self.unavailable), first: 30)
        harness.complete(.retry(Self.unavailable), first: 10)
        harness.complete(first: 0)
        harness.complete(first: 20)
        #expect(harness.commits == [10])
        #expect(harness.machine.stats.failures[.serverError] == 2)
        #expect(harness.machine.stats.retries == 0)  // `--retries 0`: nothing was sent again
        #expect(harness.reports[id]?.failure?.status == 503)
        #expect(harness.reports[id]?.records == 10)
    }

    @Test func tooLargeInTheWindowSplitsThatBatchAndRemembersTheCeiling() {
        var harness = MachineHarness(Self.configuration(.fixed(2)), records: 40)
        harness.respond = { $0.records.count > 5 ? .tooLarge(Self.tooLarge) : .accepted }
        let id = harness.flush()
        // [0..<10] is refused; its halves fit, and from then on the reads are cut at the
        // ceiling (half the records and half the bytes of the refused batch), not walked down
        // from 10 again.
        #expect(harness.uploads.first?.count == 10)
        #expect(harness.uploads.filter { $0.count > 5 }.count <= 2)
        #expect(harness.committed == 40)
        #expect(harness.reports[id]?.records == 40)
        #expect(harness.machine.batchLimits.count == 5)
    }

    /// The ceiling halves the refused batch's encoded body, the size `maxBatchBytes` limits,
    /// not its payload: an envelope of ~80 bytes around a 25-byte event must not shrink the
    /// next batches to a fifth of what worked.
    @Test func theCeilingComparesEncodedBytesWithEncodedBytes() {
        var configuration = Self.configuration(.fixed(1))
        configuration.maxBatchCount = 50
        // Each record's envelope makes it 105 bytes encoded, about ten times its payload.
        var harness = MachineHarness(configuration, records: 50)
        harness.encodedBytesPerRecord = 105
        harness.respond = { $0.records.count == 50 ? .tooLarge(Self.tooLarge) : .accepted }
        harness.flush()
        #expect(harness.uploads.first?.count == 50)
        #expect(harness.machine.batchLimits.bytes == 50 * 105 / 2)
        #expect(harness.machine.batchLimits.count == 25)
    }

    @Test func theCeilingGrowsBackAfterManyAcceptedBatches() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 10)
        harness.respond = { $0.records.count > 5 ? .tooLarge(Self.tooLarge) : .accepted }
        harness.flush()
        #expect(harness.machine.batchLimits.count == 5)
        harness.respond = { _ in .accepted }
        harness.append(Int(SyncStateMachine.BatchCeiling.growthBatches) * 10)
        harness.flush()
        #expect(harness.machine.batchLimits.count > 5)
    }

    @Test func aRefusedRecordInTheWindowIsDeadLetteredInOrder() {
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

    /// A fatal answer (a 403 from a destination that will never let this worker in) stops
    /// the worker: no more sends, nothing committed past that batch, every waiting flush ends
    /// with the error, and the machine asks its driver for the teardown `stop()` does.
    @Test func aFatalAnswerStopsTheWorker() {
        var harness = MachineHarness(Self.configuration(), records: 100)
        harness.holdUploads = true
        harness.send(.start)
        let first = harness.flush(retries: 5)
        let second = harness.flush()
        harness.complete(first: 0)
        #expect(harness.commits == [10])
        harness.complete(.fatal(Self.forbidden), first: 20)
        #expect(harness.machine.isStopped)
        #expect(harness.shutDown)
        #expect(harness.reports[first]?.failure?.status == 403)
        #expect(harness.reports[second]?.failure?.status == 403)
        #expect(harness.results[first]?.last?.name == "error(rejected)")
        let sent = harness.uploads.count
        while !harness.inFlight.isEmpty { harness.complete() }
        #expect(harness.uploads.count == sent)
        #expect(harness.commits == [10])
        #expect(harness.timer == nil)
        let late = harness.flush()
        #expect(harness.reports[late]?.failure?.code == .stopped)
    }

    @Test func aDeadlineAnswersTheFlushWhileRequestsAreInFlightAndTheyStillCommit() throws {
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

    /// `spool sync --once` beside a writer that keeps appending: the flush ends at the end
    /// of the log it saw when it started, and reads nothing past it.
    @Test func aFlushThroughAnOffsetEndsThereWhateverIsWrittenAfter() {
        var harness = MachineHarness(Self.configuration(), records: 35)
        harness.holdUploads = true
        let id = harness.flush(through: 35)
        harness.append(1_000)
        while !harness.inFlight.isEmpty { harness.complete() }
        #expect(harness.reports[id]?.records == 35)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.committed == 35)
        #expect(harness.uploads.flatMap { $0 }.allSatisfy { $0 < 35 })
        #expect(harness.machine.isIdle)
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
        #expect(harness.machine.stats.retries == 2)
    }

    /// Batches delivered since the last failure are progress: the backoff starts over instead
    /// of growing toward its cap (one failed request in every few took a sync from seconds to
    /// minutes). Every fifth request fails: no batch fails twice in a row.
    @Test func progressBetweenFailuresRestartsTheBackoff() {
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
        #expect(longest <= SyncConfiguration().backoff.base)  // never past the first step
    }

    /// Answers a round trip apart: every request in flight is answered `rtt` after the last
    /// answers, each answer refilling its slot at once.
    static func answerInFlight(_ harness: inout MachineHarness, after rtt: Duration, _ outcome: SinkOutcome = .accepted) {
        harness.now += rtt
        for _ in 0..<harness.inFlight.count { harness.complete(outcome) }
    }

    /// One 503 among 32 answers is not overload (issue 34: 20% of 503s halved the limit every
    /// round trip and pinned it at 1); half of them is, and ends the fast start once.
    @Test func theFastStartDoublesEveryRoundTripAndStopsWhenOverloadIsAShare() {
        var configuration = Self.configuration(.adaptive(max: 64))
        // The head is out past the p95 here: a hedge would take the slot the answers below count on.
        configuration.hedging = false
        var harness = MachineHarness(configuration, records: 100_000)
        harness.holdUploads = true
        harness.flush()
        var levels: [Int] = []
        for _ in 0..<5 {
            levels.append(harness.inFlight.count)
            Self.answerInFlight(&harness, after: .milliseconds(50))
        }
        #expect(levels == [1, 2, 4, 8, 16])
        #expect(harness.inFlight.count == 32)
        harness.now += .milliseconds(50)
        harness.complete(.retry(Self.unavailable), first: harness.inFlightFirsts.last)
        #expect(harness.machine.concurrency.limit == 32)
        #expect(harness.machine.concurrency.fastStart)
        // Half of the last 32 overloaded: the fast start ends at what the server took (the 16
        // answered the round trip before).
        for _ in 0..<15 { harness.complete(.retry(Self.unavailable), first: harness.inFlightFirsts.last) }
        #expect(harness.machine.concurrency.limit == 16)
        #expect(!harness.machine.concurrency.fastStart)
        #expect(harness.machine.stats.peakConcurrency == 32)
    }

    @Test func adaptiveConcurrencyNeverGrowsWhileEverythingFails() {
        var harness = MachineHarness(Self.configuration(.adaptive(max: 16)), records: 1_000)
        harness.holdUploads = true
        harness.send(.start)  // a running worker retries by itself
        for _ in 0..<20 {
            Self.answerInFlight(&harness, after: .milliseconds(5), .retry(Self.internalError))
            harness.advance(to: harness.now + .seconds(120))
        }
        #expect(harness.machine.concurrency.limit == 1)
        #expect(harness.machine.stats.peakInFlight == 1)
        #expect(harness.committed == 0)
    }
}
