import Testing
@testable import Spool

/// The parts `LogState` is split into, as pure values, by table: `SegmentTable` (the list, the
/// offsets, retention runs, the rewrite's reservation), `Retention` (which segments every
/// consumer passed) and `Waiters` (who is done at which ends).
@Suite struct SegmentTableTests {
    private static func segments(_ bases: [UInt64], size: Int64 = 1000) -> [SegmentInfo] {
        bases.map { SegmentInfo(baseSeq: $0, size: size) }
    }

    /// Sealed segments a consumer passed are those whose records end (the next base) at or
    /// below the floor; never the active one, none with no consumer.
    @Test(arguments: [
        ([], 500, []),
        ([0], 500, []),
        ([0, 100, 200], nil, []),
        ([0, 100, 200], 0, []),
        ([0, 100, 200], 99, []),
        ([0, 100, 200], 100, [0]),
        ([0, 100, 200], 150, [0]),
        ([0, 100, 200], 200, [0, 100]),
        ([0, 100, 200], 10_000, [0, 100]),
    ] as [([UInt64], UInt64?, [UInt64])])
    func retentionPassesWhatEveryConsumerPassed(bases: [UInt64], floor: UInt64?, passed: [UInt64]) {
        let retention = Retention(floor: floor)
        #expect(retention.passedSegments(of: Self.segments(bases)).map(\.baseSeq) == passed)
    }

    /// The floor is the lowest offset of every consumer; a retention run counts in flight only
    /// when it has something to delete, and none begins when the files are not held.
    @Test func retentionRunsFollowTheLowestOffset() {
        var table = SegmentTable(segments: Self.segments([0, 100, 200]))
        let noConsumer = table.beginRetention(allowed: true)
        #expect(noConsumer.isEmpty && table.retentionsInFlight == 0)
        table.recordOffset(of: "a", at: 250)
        table.recordOffset(of: "b", at: 120)
        #expect(table.retention.floor == 120)
        let released = table.beginRetention(allowed: false)
        #expect(released.isEmpty && table.retentionsInFlight == 0)
        let first = table.beginRetention(allowed: true)
        #expect(first.map(\.baseSeq) == [0] && table.retentionsInFlight == 1)
        table.finishRetention()
        table.forgetConsumer("b")
        #expect(table.retention.floor == 250)
        let second = table.beginRetention(allowed: true)
        #expect(second.map(\.baseSeq) == [0, 100])
    }

    /// At most one retention run is queued, and none while the files are not held.
    @Test func oneRetentionRunIsQueued() {
        var table = SegmentTable(segments: Self.segments([0]))
        let released = table.queueRetention(allowed: false)
        let first = table.queueRetention(allowed: true)
        let second = table.queueRetention(allowed: true)
        #expect(!released && first)
        #expect(!second, "one at a time")
        table.retentionDequeued()
        let third = table.queueRetention(allowed: true)
        #expect(third)
    }

    /// Forgetting never takes the active segment; relisting puts back in seq order.
    @Test(arguments: [
        ([], [], [0, 100, 200, 300]),
        ([0], [0], [100, 200, 300]),
        ([100, 0], [0, 100], [200, 300]),
        ([300], [], [0, 100, 200, 300]),
        ([200, 300, 50], [200], [0, 100, 300]),
    ] as [([UInt64], [UInt64], [UInt64])])
    func forgettingAndRelisting(forget: [UInt64], forgotten: [UInt64], left: [UInt64]) {
        var table = SegmentTable(segments: Self.segments([0, 100, 200, 300]))
        let taken = table.forgetSegments(Self.segments(forget))
        #expect(taken.map(\.baseSeq) == forgotten)
        #expect(table.segments.map(\.baseSeq) == left)
        table.relistSegments(taken.reversed())
        #expect(table.segments.map(\.baseSeq) == [0, 100, 200, 300])
    }

    /// What the cap counts: the listed sealed segments, the active one at the write's size (or
    /// a write in flight's, or as listed), and the rewrite's file (asked-for size, else its
    /// reservation, which a cancel takes away).
    @Test func bytesUnderCapCountEveryFile() throws {
        var table = SegmentTable(segments: [SegmentInfo(baseSeq: 0, size: 1000), SegmentInfo(baseSeq: 100, size: 300)])
        #expect(table.bytesUnderCap() == 1300)
        #expect(table.bytesUnderCap(activeSizeAfter: 500) == 1500)
        table.noteActiveSizeBeingWritten(450)
        #expect(table.bytesUnderCap() == 1450)
        #expect(table.bytesUnderCap(activeSizeAfter: 200) == 1200, "the writer's own call says the size")
        table.activeWriteFinished()
        #expect(table.bytesUnderCap() == 1300)
        let began = table.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 1000), allowed: true)
        let begun = try #require(began)
        table.noteRewriteWritten(400)
        #expect(table.rewriteReservation == 400 && table.bytesUnderCap() == 1700)
        #expect(table.bytesUnderCap(rewriteBytes: 600) == 1900)
        table.cancelRewrite()
        #expect(begun.stop.isRaised && table.rewriteReservation == 0 && table.bytesUnderCap() == 1300)
        #expect(!table.rewriteUnstopped && table.rewrite != nil, "cancelled, it still runs until it ends")
    }

    /// A rewrite begins only on a listed sealed segment at its listed size, one at a time, when
    /// allowed; forgetting its segment stops it; a replacement takes the new size and says what
    /// it saved.
    @Test func theRewriteReservation() throws {
        var table = SegmentTable(segments: Self.segments([0, 100, 200]))
        let active = table.beginRewrite(of: SegmentInfo(baseSeq: 200, size: 1000), allowed: true)
        #expect(active == nil, "not the active one")
        let resized = table.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 999), allowed: true)
        #expect(resized == nil, "only at its listed size")
        let refused = table.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 1000), allowed: false)
        #expect(refused == nil)
        let began = table.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 1000), allowed: true)
        let first = try #require(began)
        let second = table.beginRewrite(of: SegmentInfo(baseSeq: 100, size: 1000), allowed: true)
        #expect(second == nil, "one at a time")
        _ = table.forgetSegments(Self.segments([100]))
        #expect(table.rewriteUnstopped)
        _ = table.forgetSegments(Self.segments([0]))
        #expect(first.stop.isRaised && !table.rewriteUnstopped)
        let saved = table.finishRewrite(replacedBy: 10)
        #expect(saved == nil, "its segment is gone: nothing replaced")
        #expect(table.rewrite == nil)

        var other = SegmentTable(segments: Self.segments([0, 100]))
        let again = other.beginRewrite(of: SegmentInfo(baseSeq: 0, size: 1000), allowed: true)
        #expect(again != nil)
        let savedByOther = other.finishRewrite(replacedBy: 300)
        #expect(savedByOther == 700)
        #expect(other.segments[0].size == 300 && other.rewrite == nil && other.diskBytes == 1300)
    }

    /// Blocking waiters complete once their level's end passes their record, in order, and the
    /// others stay; failing the rest names each one's record, or else its level's end.
    @Test(arguments: [
        (0, 0, [false, false, false, false]),
        (5, 0, [true, false, true, false]),
        (5, 5, [true, true, true, false]),
        (10, 3, [true, false, true, true]),
        (10, 10, [true, true, true, true]),
    ] as [(UInt64, UInt64, [Bool])])
    func waitersCompleteAtTheirLevel(writtenEnd: UInt64, syncedEnd: UInt64, done: [Bool]) throws {
        var waiters = Waiters()
        let waits: [(Wait, Durability)] = [
            (Wait(end: 5, record: 4), .written), (Wait(end: 5, record: 4), .synced),
            (Wait(end: 3, record: nil), .written), (Wait(end: 10, record: nil), .written),
        ]
        let ids = waits.map { waiters.addBlocking($0.0, level: $0.1) }
        #expect(waiters.synced == 1 && waiters.count == 4)
        waiters.completeReached(writtenEnd: writtenEnd, syncedEnd: syncedEnd)
        #expect(waiters.count == done.filter { !$0 }.count)
        #expect(waiters.synced == (done[1] ? 0 : 1))
        let (ready, failed) = waiters.failPending(with: SpoolError(.closed, "closed"), writtenEnd: writtenEnd, syncedEnd: syncedEnd)
        #expect(ready.isEmpty && failed.isEmpty, "blocking waiters get results, not continuations")
        #expect(waiters.isEmpty && waiters.synced == 0)
        for (index, id) in ids.enumerated() {
            let taken = waiters.takeBlockingResult(id)
            let result = try #require(taken)
            switch result {
            case .success: #expect(done[index], "waiter \(index) completed")
            case .failure(let error):
                #expect(!done[index], "waiter \(index) failed")
                let level = waits[index].1 == .synced ? syncedEnd : writtenEnd
                #expect(error.seq == (waits[index].0.record ?? level))
            }
            let again = waiters.takeBlockingResult(id)
            #expect(again == nil, "taken once")
        }
    }
}
