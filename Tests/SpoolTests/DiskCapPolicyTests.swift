import Testing
@testable import Spool

/// `DiskCap` as a pure policy, by table: which oldest sealed segments go for a write (or a cold
/// rewrite) to fit, the records no consumer read among them, what is still over, and when a
/// rewrite in flight gives way. `EventLog` only executes what it decides.
@Suite struct DiskCapPolicyTests {
    /// Three sealed segments of 1000 bytes (seqs 0..<300) and the active one of 500.
    private static func table(floor: UInt64? = nil) -> SegmentTable {
        var table = SegmentTable(segments: [
            SegmentInfo(baseSeq: 0, size: 1000), SegmentInfo(baseSeq: 100, size: 1000),
            SegmentInfo(baseSeq: 200, size: 1000), SegmentInfo(baseSeq: 300, size: 500),
        ])
        if let floor { table.recordOffset(of: "c", at: floor) }
        return table
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var cap: Int64
        var activeSizeAfter: Int64?
        var floor: UInt64? = nil
        var doomed: [UInt64]
        var unread: [UInt64: Range<UInt64>]
        var over: Int64
        var testDescription: String { "cap \(cap), active after \(String(describing: activeSizeAfter)), floor \(String(describing: floor))" }
    }

    @Test(arguments: [
        // 3600 fits: nothing goes.
        Case(cap: 4000, activeSizeAfter: 600, doomed: [], unread: [:], over: -400),
        // The active segment as listed (3500) fits exactly.
        Case(cap: 3500, activeSizeAfter: nil, doomed: [], unread: [:], over: 0),
        // The oldest goes first, and only as many as needed.
        Case(cap: 3000, activeSizeAfter: 600, doomed: [0], unread: [0: 0..<100], over: -400),
        Case(cap: 1000, activeSizeAfter: 600, doomed: [0, 100, 200], unread: [0: 0..<100, 100: 100..<200, 200: 200..<300], over: -400),
        // Nothing sealed is left and the active segment alone passes the cap: over, said.
        Case(cap: 500, activeSizeAfter: 600, doomed: [0, 100, 200], unread: [0: 0..<100, 100: 100..<200, 200: 200..<300], over: 100),
        // What every consumer read is not counted as dropped.
        Case(cap: 1000, activeSizeAfter: 600, floor: 150, doomed: [0, 100, 200], unread: [100: 150..<200, 200: 200..<300], over: -400),
        Case(cap: 1000, activeSizeAfter: 600, floor: 300, doomed: [0, 100, 200], unread: [:], over: -400),
    ])
    func aWriteDropsTheOldestUntilItFits(_ c: Case) {
        let drop = DiskCap(maxBytes: c.cap).dropOldest(from: Self.table(floor: c.floor), activeSizeAfter: c.activeSizeAfter, rewriteGrowingTo: nil)
        #expect(drop.doomed.map(\.baseSeq) == c.doomed)
        #expect(drop.unread == c.unread)
        #expect(drop.over == c.over)
        #expect(!drop.cancelsRewrite)
    }

    /// A write that needs the room of a rewrite in flight cancels it (its reservation stops
    /// counting) and may drop its segment; a rewrite asking for room never drops its own
    /// segment, and is never "over".
    @Test func aRewriteGivesWayToAWriteButNotToItself() throws {
        var table = Self.table()
        let began = table.beginRewrite(of: SegmentInfo(baseSeq: 100, size: 1000), allowed: true)
        #expect(began != nil)
        table.noteRewriteWritten(400)
        let cap = DiskCap(maxBytes: 2900)

        // The write: 3600 + 400 reserved. Dropping 0 leaves 2600 + 400; the rewrite's segment
        // is next: it gives way (2600), which fits.
        let write = cap.dropOldest(from: table, activeSizeAfter: 600, rewriteGrowingTo: nil)
        #expect(write.doomed.map(\.baseSeq) == [0] && write.cancelsRewrite && write.over == -300)

        // A tighter cap drops the cancelled rewrite's segment too.
        let tight = DiskCap(maxBytes: 1500).dropOldest(from: table, activeSizeAfter: 600, rewriteGrowingTo: nil)
        #expect(tight.doomed.map(\.baseSeq) == [0, 100, 200] && tight.cancelsRewrite)

        // The rewrite asks to grow to 800: 3500 + 800; it drops 0 (3300), then stops at its own.
        let own = cap.dropOldest(from: table, activeSizeAfter: nil, rewriteGrowingTo: 800)
        #expect(own.doomed.map(\.baseSeq) == [0] && !own.cancelsRewrite && own.over == 0)

        // Once stopped, its segment is like any other, and it reserves nothing.
        table.cancelRewrite()
        let after = cap.dropOldest(from: table, activeSizeAfter: 600, rewriteGrowingTo: nil)
        #expect(after.doomed.map(\.baseSeq) == [0] && !after.cancelsRewrite)
    }

    /// A rewrite's growth fits only in free room, with what appends hold pending counted first.
    @Test(arguments: [
        (bytes: Int64(500), pending: 0, fits: true),
        (500, 1, false),
        (400, 100, true),
        (501, 0, false),
    ])
    func aRewriteFitsOnlyInFreeRoom(bytes: Int64, pending: Int, fits: Bool) {
        // 3500 on disk under a cap of 4000: 500 free.
        #expect(DiskCap(maxBytes: 4000).rewriteFits(growingTo: bytes, in: Self.table(), pendingBytes: pending) == fits)
    }

    /// An append under `rejectNew` fits with the files and what is pending, or is refused; a
    /// rewrite's reservation never refuses it, the rewrite gives way instead.
    @Test(arguments: [
        // 3500 on disk under a cap of 4000; nothing reserved.
        (cap: Int64(4000), framed: 300, pending: 200, reserved: Int64(0), admission: DiskCap.Admission.admitted),
        (4000, 301, 200, 0, .refused),
        (3500, 1, 0, 0, .refused),
        // 400 reserved by a rewrite of segment 100: the append fits only without it.
        (4000, 101, 0, 400, .admittedCancellingRewrite),
        (4000, 100, 0, 400, .admitted),
        (4000, 100, 0, 300, .admitted),
        (4000, 600, 0, 400, .refused),
    ])
    func anAppendUnderRejectNewFitsOrIsRefused(cap: Int64, framed: Int, pending: Int, reserved: Int64, admission: DiskCap.Admission) throws {
        var table = Self.table()
        if reserved > 0 {
            #expect(table.beginRewrite(of: SegmentInfo(baseSeq: 100, size: 1000), allowed: true) != nil)
            table.noteRewriteWritten(reserved)
        }
        #expect(DiskCap(maxBytes: cap).admit(framedBytes: framed, pendingBytes: pending, in: table) == admission)
    }
}
