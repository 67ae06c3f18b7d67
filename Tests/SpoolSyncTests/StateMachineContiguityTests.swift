import Spool
import Testing
@testable import SpoolSync

/// The window is one contiguous run from the committed offset, whatever cuts it while a read
/// runs: the interleavings that lost records behind nginx's 413s (issue 33).
@Suite struct StateMachineContiguityTests {
    static let tooLarge = SyncError(.payloadTooLarge, "too big", status: 413)
    static let unavailable = SyncError(.serverError, "the server failed", status: 503, overloaded: true)

    static func configuration(_ concurrency: SyncConfiguration.Concurrency) -> SyncConfiguration {
        var configuration = SyncConfiguration.manual
        configuration.maxBatchCount = 10
        configuration.concurrency = concurrency
        return configuration
    }

    /// Every offset the consumer was committed past was carried by an accepted request.
    static func expectNothingCommittedUnsent(_ harness: MachineHarness, sourceLocation: SourceLocation = #_sourceLocation) {
        let missing = (0..<harness.committed).filter { !harness.accepted.contains($0) }
        #expect(missing.isEmpty, "committed past \(missing.count) records never accepted, from \(missing.first.map(String.init) ?? "-")",
                sourceLocation: sourceLocation)
    }

    /// One request in flight (an app's default): the read ahead runs while the batch in flight
    /// is refused as too large twice. The second 413 drops the unsent half behind it, so the
    /// read, asked from the old end of the window, no longer starts where the window ends.
    @Test func aReadOutrunByTwo413sIsDiscardedNotAppended() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 100)
        harness.holdUploads = true
        harness.holdReads = true
        let id = harness.flush(retries: 10)
        harness.completeRead()
        #expect(harness.inFlightFirsts == [0])
        harness.complete(first: 0)
        #expect(harness.committed == 10)
        #expect(harness.inFlightFirsts == [10])
        #expect(harness.heldRead?.from == 20)  // reading ahead while 10..<20 is in flight
        harness.complete(.tooLarge(Self.tooLarge), first: 10)  // split: 10..<15 sent, 15..<20 waits
        #expect(harness.inFlightFirsts == [10])
        harness.complete(.tooLarge(Self.tooLarge), first: 10)  // drops 15..<20 to cut it again smaller
        harness.completeRead()  // from 20: not where the window ends now
        #expect(harness.machine.windowEnd == 15)  // discarded, not appended after 10..<15
        harness.holdReads = false
        harness.drain()
        #expect(harness.committed == 100)
        #expect(harness.reports[id]?.records == 100)
        Self.expectNothingCommittedUnsent(harness)
    }

    /// Adaptive concurrency's case: several batches in flight and more read ahead unsent when
    /// a 413 comes back during the next read.
    @Test func a413DuringAReadAheadLeavesNoGap() {
        var harness = MachineHarness(Self.configuration(.fixed(4)), records: 200)
        harness.holdUploads = true
        harness.holdReads = true
        harness.flush(retries: 10)
        harness.completeRead()  // 8 batches: 4 sent, 4 unsent
        #expect(harness.inFlightFirsts == [0, 10, 20, 30])
        harness.complete(first: 0)  // commits 0..<10; sends 40; reads ahead from 80
        #expect(harness.heldRead?.from == 80)
        harness.complete(.tooLarge(Self.tooLarge), first: 10)  // the unsent 50..<80 go, to be cut smaller
        harness.completeRead()
        #expect(harness.machine.windowEnd == 50)
        harness.holdReads = false
        harness.drain()
        #expect(harness.committed == 200)
        Self.expectNothingCommittedUnsent(harness)
    }

    /// A failure drops what follows it in the window; a read that started before it is not
    /// appended behind the failed batch either.
    @Test func aFailureDuringAReadAheadLeavesNoGap() {
        var harness = MachineHarness(Self.configuration(.fixed(2)), records: 100)
        harness.holdUploads = true
        harness.holdReads = true
        harness.flush(retries: 10)
        harness.completeRead()
        harness.complete(first: 0)
        #expect(harness.heldRead != nil)
        harness.complete(.retry(Self.unavailable), first: 10)
        harness.completeRead()
        harness.holdReads = false
        harness.drain(advancing: .seconds(60))
        #expect(harness.committed == 100)
        Self.expectNothingCommittedUnsent(harness)
    }

    /// The check itself: a window with a hole is refused with the offsets named, and nothing
    /// past the committed offset is committed.
    @Test func aGapInTheWindowStopsTheWorkerBeforeAnyCommit() {
        var machine = SyncStateMachine(configuration: Self.configuration(.fixed(2)), committed: 0, pending: 30)
        let records = (0..<30).map { Record(seq: UInt64($0), timestamp: 0, payload: [0x31]) }
        _ = machine.handle(.flushRequested(id: 0, deadline: nil, retries: 0), now: .zero, jitter: 0)
        let batches = [SyncBatch(records: Array(records[0..<10]), start: 0, end: 10),
                       SyncBatch(records: Array(records[20..<30]), start: 20, end: 30)]
        let actions = machine.handle(.readCompleted(batches), now: .zero, jitter: 0)
        #expect(!actions.contains { if case .commit = $0 { true } else { false } })
        #expect(actions.contains { if case .shutDown = $0 { true } else { false } })
        #expect(machine.stats.fatalError?.code == .internalError)
        #expect(machine.stats.fatalError?.message.contains("records 10..<20 are missing") == true)
        #expect(machine.isStopped)
    }

    /// Found by the simulator (a hang): a 413 on a batch ahead of a failed one. The halves of
    /// the split must still go out, or the failed batch never reaches the head and the drain
    /// waits for ever.
    @Test func the413HalvesAheadOfAFailedBatchAreStillSent() {
        var harness = MachineHarness(Self.configuration(.fixed(4)), records: 40)
        harness.holdUploads = true
        let id = harness.flush(retries: 10)
        #expect(harness.inFlightFirsts == [0, 10, 20, 30])
        harness.complete(.retry(Self.unavailable), first: 10)
        harness.complete(.tooLarge(Self.tooLarge), first: 0)
        #expect(harness.inFlightFirsts.contains(0) && harness.inFlightFirsts.contains(5))
        harness.drain(advancing: .seconds(60))
        #expect(harness.committed == 40)
        #expect(harness.reports[id]?.failure == nil)
        Self.expectNothingCommittedUnsent(harness)
    }

    /// Found by the simulator: a flush through an offset whose records before it were all
    /// dropped (the cap) reported success with the consumer still short of the offset. The
    /// dropped range up to the offset is committed.
    @Test func aFlushThroughAnOffsetCommitsARangeDroppedBeforeIt() {
        var harness = MachineHarness(Self.configuration(.fixed(1)), records: 20)
        harness.skipped = Set(0..<14)
        let id = harness.flush(through: 14)
        #expect(harness.reports[id]?.failure == nil)
        #expect(harness.committed == 14)
        #expect(harness.uploads.isEmpty)
    }
}
