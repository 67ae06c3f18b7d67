import Spool
import Testing
@testable import SpoolSync

/// Hedged requests, on a manual clock: the request holding the commit back is sent once more
/// when it has been out past the 95th percentile of the recent round trips; the first copy
/// accepted settles the batch, whatever the other copy says later; never before enough round
/// trips are known, never when hedging is off or one request is in flight, and within a
/// budget of 5% of the requests.
@Suite struct StateMachineHedgeTests {
    static let unavailable = SyncError(.serverError, "the server failed", status: 503, overloaded: true)

    /// Manual flushes, batches of 10, `concurrency` requests in flight at most.
    static func configuration(_ concurrency: SyncConfiguration.Concurrency = .fixed(4), hedging: Bool = true) -> SyncConfiguration {
        var configuration = SyncConfiguration.manual
        configuration.maxBatchCount = 10
        configuration.concurrency = concurrency
        configuration.hedging = hedging
        return configuration
    }

    /// A drain of `batches` batches: the first `answered` are answered oldest first, one every
    /// 5 ms (round trips of 20 ms at 4 in flight); then the oldest left stalls while every
    /// other batch is answered, one a millisecond, and `wait` passes.
    static func stalledHead(
        _ configuration: SyncConfiguration, batches: Int = 30, answered: Int = 24, wait: Duration = .seconds(1)
    ) -> (harness: MachineHarness, head: UInt64) {
        var harness = MachineHarness(configuration, records: batches * 10)
        harness.holdUploads = true
        harness.flush()
        for _ in 0..<answered {
            harness.advance(to: harness.now + .milliseconds(5))
            harness.complete()
        }
        let head = harness.inFlightFirsts[0]
        while let other = harness.inFlightFirsts.first(where: { $0 != head }) {
            harness.advance(to: harness.now + .milliseconds(1))
            harness.complete(first: other)
        }
        harness.advance(to: harness.now + wait)
        return (harness, head)
    }

    /// The slots of the two copies of the batch starting at `head`, in the order sent.
    static func copies(of head: UInt64, in harness: MachineHarness) -> [Int] {
        harness.inFlight.filter { $0.batch.records.first?.seq == head }.map(\.slot)
    }

    @Test func theDelayIsThe95thPercentileOfTheLast64RoundTrips() {
        var hedging = Hedging(enabled: true)
        for step in 1...19 { hedging.measured(.milliseconds(step * 10)) }
        #expect(hedging.delay == nil)  // 19 known: not enough
        hedging.measured(.milliseconds(200))
        #expect(hedging.delay == .milliseconds(190))  // the 19th of 20
        for _ in 0..<Hedging.samples { hedging.measured(.milliseconds(1)) }
        #expect(hedging.delay == Hedging.floor)  // the old ones forgotten, and never below the floor
    }

    @Test func aHedgeGoesOutOnceAndTheFirstAcceptedCopySettlesTheBatch() {
        var (harness, head) = Self.stalledHead(Self.configuration())
        #expect(harness.uploads.filter { $0.first == head }.count == 2)  // once, however long it waits
        #expect(harness.machine.stats.hedges == 1)
        #expect(harness.committed == head)
        let slots = Self.copies(of: head, in: harness)
        #expect(slots.count == 2)
        // The first copy answers first: it settles the batch; the hedge runs on to its answer
        // (never cancelled: a cancel mid-connect left a connection a serial server had
        // accepted idle in the client's pool, and the server waited on it), holding its slot.
        harness.complete(slot: slots[0])
        #expect(harness.committed == 300)
        #expect(harness.machine.window.retired == [slots[1]])
        #expect(harness.inFlight.contains { $0.slot == slots[1] })
        // The hedge's answer, accepted too, counts nothing twice.
        harness.complete(slot: slots[1])
        #expect(harness.machine.stats.records == 300)
        #expect(harness.machine.stats.batches == 30)
        #expect(harness.machine.stats.requests == 31)
        #expect(harness.reports[0]?.records == 300)
    }

    @Test func aHedgedBatchStaysSettledWhenItsFirstCopyIsRefusedLater() {
        for late in [SinkOutcome.retry(Self.unavailable), .rejected(SyncError(.rejected, "bad", status: 400)),
                     .tooLarge(SyncError(.payloadTooLarge, "too big", status: 413))] {
            var (harness, head) = Self.stalledHead(Self.configuration())
            let slots = Self.copies(of: head, in: harness)
            #expect(slots.count == 2)
            // The hedge is accepted first: the batch is settled and committed; the first copy
            // runs on, and its answer is ignored.
            harness.complete(slot: slots[1])
            #expect(harness.committed == 300)
            #expect(harness.machine.window.retired == [slots[0]])
            let concurrency = harness.machine.concurrency.limit
            // The first copy's failure, later: ignored (no retry, no split, no failure, no backoff).
            harness.complete(late, slot: slots[0])
            #expect(harness.committed == 300)
            #expect(harness.machine.stats.failures.isEmpty)
            #expect(harness.machine.stats.splits == 0)
            #expect(harness.machine.stats.retries == 0)
            #expect(harness.machine.stats.records == 300)
            #expect(harness.machine.concurrency.limit == concurrency)
            #expect(harness.deadLettered.isEmpty)
            #expect(harness.reports[0]?.failure == nil)
        }
    }

    /// The hedge fails while the first copy is still out: the first copy carries the batch.
    @Test func aFailedHedgeLeavesTheBatchToItsFirstCopy() {
        var (harness, head) = Self.stalledHead(Self.configuration())
        let slots = Self.copies(of: head, in: harness)
        harness.complete(.retry(Self.unavailable), slot: slots[1])
        #expect(harness.committed == head)
        #expect(harness.machine.stats.retries == 0)
        harness.advance(to: harness.now + .seconds(5))
        #expect(harness.uploads.filter { $0.first == head }.count == 2)  // no third copy
        harness.complete(slot: slots[0])
        #expect(harness.committed == 300)
        #expect(harness.machine.window.retired.isEmpty)
    }

    @Test func noHedgeBeforeEnoughRoundTripsAreKnown() {
        // 14 batches: 13 answered (fewer than `Hedging.minimumSamples`), and the head stalls.
        let (few, head) = Self.stalledHead(Self.configuration(), batches: 14, answered: 2)
        #expect(few.machine.hedging.delay == nil)
        #expect(few.machine.stats.hedges == 0)
        #expect(few.uploads.filter { $0.first == head }.count == 1)
        #expect(few.committed == head)
    }

    @Test func noHedgeWhenHedgingIsOff() {
        let (harness, head) = Self.stalledHead(Self.configuration(hedging: false))
        #expect(harness.machine.stats.hedges == 0)
        #expect(harness.uploads.filter { $0.first == head }.count == 1)
    }

    /// `.fixed(1)`: one request at a time, as the server expects; a copy would be a second.
    @Test func noHedgeWithOneRequestInFlight() {
        let (harness, head) = Self.stalledHead(Self.configuration(.fixed(1)))
        #expect(!harness.machine.hedging.enabled)
        #expect(harness.machine.stats.hedges == 0)
        #expect(harness.uploads.filter { $0.first == head }.count == 1)
    }

    /// One batch in 16 is answered after 500 ms, the others after 5 ms: more slow batches hold
    /// the frontier than the budget pays for. Hedges stop at one for 20 other requests, and
    /// the drain still delivers everything once.
    @Test func theBudgetLimitsHedges() {
        var harness = MachineHarness(Self.configuration(), records: 4_000)
        harness.holdUploads = true
        harness.flush()
        var sent: [Int: Duration] = [:]
        while !harness.inFlight.isEmpty {
            harness.advance(to: harness.now + .milliseconds(5))
            for (slot, batch) in harness.inFlight {
                let at = sent[slot] ?? harness.now
                sent[slot] = at
                let slow = (batch.records[0].seq / 10) % 16 == 15 && !harness.machine.window.retired.contains(slot)
                    && harness.inFlight.filter({ $0.batch.start == batch.start }).count == 1
                if harness.now - at >= (slow ? .milliseconds(500) : .milliseconds(5)) { harness.complete(slot: slot) }
            }
        }
        let stats = harness.machine.stats
        #expect(stats.hedges * Hedging.cost <= stats.requests - stats.hedges)
        // The budget, not the slow batches, is what stops them.
        #expect(stats.hedges * Hedging.cost > stats.requests - stats.hedges - 3 * Hedging.cost, "\(stats.hedges) of \(stats.requests)")
        #expect(harness.committed == 4_000)
        #expect(stats.records == 4_000)
        #expect(stats.batches == 400)
    }
}
