import Foundation
import Testing
@testable import Spool

/// A power cut after appends at `written`, when the page cache wrote a later page of the active
/// segment back and not an earlier one (issue 36): the earlier page reads as zeros. The records
/// were never synced, so losing them is allowed; the log must still open, keep every record
/// after the hole, append and verify clean (FORMAT.md §6, "Holes a power cut leaves"). The same
/// damage to synced records, and any damage that is not a lost page, is corruption, reported
/// with every block after it kept.
@Suite struct OutOfOrderWriteBackTests {
    static let page = 4096

    /// 40 records of 600 bytes at `written` (about 16 KiB compressed, blocks of 1 KiB), synced at the
    /// end when `synced`, then the log closed (closing does not sync). The segment's bytes.
    func appendForty(_ dir: TemporaryDirectory, synced: Bool) async throws -> [UInt8] {
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        for i in 0..<40 { try await log.append(noisyPayload(i, size: 600), durability: .written) }
        if synced { try await log.sync() }
        try log.close()
        let bytes = readFile(dir.file(Format.segmentName(0)))
        #expect(bytes.count > 3 * Self.page, "blocks follow the zeroed pages")
        return bytes
    }

    /// Zeroes `range` of the only segment.
    func zero(_ range: Range<Int>, of bytes: [UInt8], in dir: TemporaryDirectory) {
        var damaged = bytes
        damaged.replaceSubrange(range, with: [UInt8](repeating: 0, count: range.count))
        writeFile(dir.file(Format.segmentName(0)), damaged)
    }

    /// Opens the log after a power cut left one hole, page `lost` of the only segment, in
    /// records never synced: every record outside the hole is read back (none is cut), the
    /// hole's seqs read as *missing* (never corrupt), the blocks after it are in a segment of
    /// their own, and the log appends and verifies clean. The lost range.
    func checkHole(_ dir: TemporaryDirectory, bytes: [UInt8], lost: Range<Int>, _ context: String) throws -> Range<UInt64> {
        let blocks = blockHeaders(bytes)
        let torn = try #require(blocks.first { $0.offset + $0.header.totalSize > lost.lowerBound }, "\(context)")
        let next = try #require(blocks.first { $0.offset >= lost.upperBound }, "\(context): valid blocks follow the damage")
        let hole = torn.header.firstSeq..<next.header.firstSeq
        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(snapshot.recoveryReport.powerCutHoles.map(\.records) == [hole], "\(context)")
        #expect(try snapshot.verify().isClean, "\(context): a power cut's hole is not corruption, before a writer repairs it too")
        snapshot.close()
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(log.recoveryReport.powerCutHoles == [.init(segment: Format.segmentName(0), records: hole, movedTo: Format.segmentName(hole.upperBound))], "\(context)")
        #expect(log.recoveryReport.tornTail == nil && log.recoveryReport.corruptions.isEmpty, "\(context)")
        #expect(log.nextSeq == 40, "\(context): no block after the hole is cut")
        let items = try log.readAll()
        #expect(notices(items).map(\.kind) == [.missing] && notices(items).first?.range == hole, "\(context): \(notices(items))")
        #expect(records(items).map(\.seq) == Array(0..<hole.lowerBound) + Array(hole.upperBound..<40), "\(context)")
        #expect(records(items).allSatisfy { $0.payload == noisyPayload(Int($0.seq), size: 600) }, "\(context)")
        #expect(try log.appendBlocking(noisyPayload(40, size: 600), durability: .synced) == 40, "\(context)")
        #expect(try log.verify().isClean, "\(context)")
        try log.close()
        #expect(readFile(dir.file(Format.segmentName(0))).count == torn.offset, "\(context): the old segment ends where the hole began")
        // Opened again: nothing left to repair, and the same records.
        let again = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        defer { try? again.close() }
        #expect(again.recoveryReport.powerCutHoles.isEmpty && again.recoveryReport.corruptions.isEmpty, "\(context)")
        #expect(records(try again.readAll()).count == 41 - hole.count, "\(context)")
        return hole
    }

    /// The first kind: the first page was not written back after the header was synced: it
    /// holds the header and zeros (what it held at that sync). Every record in it is lost to
    /// the power cut (they were only `written`); the blocks after it are kept.
    @Test func anUnsyncedSegmentWhoseFirstPageIsLostKeepsTheBlocksAfterIt() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        zero(Format.segmentHeaderSize..<Self.page, of: bytes, in: dir)
        #expect(try checkHole(dir, bytes: bytes, lost: Format.segmentHeaderSize..<Self.page, "first page lost").lowerBound == 0)
    }

    /// The second kind: a page inside the blocks was not written back, later ones were. The
    /// records there were never synced: lost to the power cut, reported as *missing*, and
    /// the valid blocks after them kept (issue 50: a torn tail is damage with nothing valid
    /// after it).
    @Test func unsyncedBlocksTornByALostPageAreAHoleAndTheBlocksAfterItAreKept() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        zero(Self.page..<2 * Self.page, of: bytes, in: dir)
        #expect(try checkHole(dir, bytes: bytes, lost: Self.page..<2 * Self.page, "a page inside the blocks lost").lowerBound > 0)
    }

    /// A crash while an open moves the blocks after a hole: before the old segment was cut (it
    /// still holds the hole, and the moved copy waits under its `.moving` name), or after it
    /// was cut and before the copy was renamed into place. Either way the next open ends where
    /// an uninterrupted one would: every record after the hole kept, the hole read as missing.
    @Test func aMoveInterruptedByACrashIsFinishedByTheNextOpen() async throws {
        for cut in [false, true] {
            let dir = TemporaryDirectory()
            defer { dir.cleanup() }
            let bytes = try await appendForty(dir, synced: false)
            zero(Self.page..<2 * Self.page, of: bytes, in: dir)
            let damaged = readFile(dir.file(Format.segmentName(0)))
            let watermark = readFile(dir.file(Format.watermarkFileName))
            // An open that moves the blocks and writes nothing more, then the crash staged: the
            // moved segment back under its `.moving` name, the old one whole again or cut.
            let first = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
            let hole = try #require(first.recoveryReport.powerCutHoles.first).records
            try first.close()
            let moved = Format.segmentName(hole.upperBound)
            try DirectoryIO.rename(dir.file(moved), to: dir.file(moved + Format.movingSuffix))
            if !cut { writeFile(dir.file(Format.segmentName(0)), damaged) }
            writeFile(dir.file(Format.watermarkFileName), watermark)  // the crash came before the open set it
            let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
            defer { try? log.close() }
            #expect(log.recoveryReport.powerCutHoles.map(\.records) == [hole], "cut: \(cut)")
            #expect(log.recoveryReport.corruptions.isEmpty && log.recoveryReport.tornTail == nil, "cut: \(cut)")
            #expect(log.nextSeq == 40, "cut: \(cut)")
            let items = try log.readAll()
            #expect(notices(items).map(\.kind) == [.missing], "cut: \(cut): \(notices(items))")
            #expect(records(items).map(\.seq) == Array(0..<hole.lowerBound) + Array(hole.upperBound..<40), "cut: \(cut)")
            #expect(!DirectoryIO.exists(dir.file(moved + Format.movingSuffix)), "cut: \(cut)")
            #expect(try log.appendBlocking(noisyPayload(40, size: 600), durability: .synced) == 40, "cut: \(cut)")
            #expect(try log.verify().isClean, "cut: \(cut)")
        }
    }

    /// Issue 50, item 5: a watermark behind the durable end (forged to 0 here; a process other
    /// than the writer that syncs leaves it behind too) never makes damage a torn tail when
    /// intact blocks follow it: a flipped byte is corruption, reported, and every record after
    /// it is kept.
    @Test func aStaleWatermarkNeverCutsTheIntactBlocksAfterDamage() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var bytes = try await appendForty(dir, synced: true)
        let blocks = blockHeaders(bytes)
        #expect(blocks.count >= 5)
        let damaged = blocks[blocks.count / 3]
        bytes[damaged.offset + damaged.header.headerSize + 3] ^= 0x40
        writeFile(dir.file(Format.segmentName(0)), bytes)
        try FileManager.default.removeItem(atPath: dir.file(Format.watermarkFileName))
        try OffsetFile.create(dir.file(Format.watermarkFileName), directory: dir.path, nextSeq: 0, permissions: 0o600)
        #expect(try SyncWatermark.read(directory: dir.path) == 0)

        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(snapshot.recoveryReport.tornTail == nil)
        #expect(try !snapshot.verify().isClean, "the flipped byte is corruption, before a writer opens the log too")
        snapshot.close()
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        defer { try? log.close() }
        #expect(log.recoveryReport.tornTail == nil)
        #expect(log.recoveryReport.powerCutHoles.isEmpty)
        #expect(log.recoveryReport.corruptions.count == 1)
        #expect(log.nextSeq == 40, "the blocks after the damage are kept")
        let items = try log.readAll()
        #expect(notices(items).map(\.kind) == [.corrupt])
        #expect(records(items).map(\.seq) == Array(0..<damaged.header.firstSeq) + Array(damaged.header.endSeq..<40))
        #expect(try log.appendBlocking(noisyPayload(40, size: 600), durability: .synced) == 40)
        #expect(try !log.verify().isClean)
    }

    /// A damaged header with valid blocks after it is never a power cut's (the header is synced
    /// before any block is written after it), whatever the watermark: the log is refused and
    /// nothing is rewritten.
    @Test func aDamagedHeaderBeforeValidBlocksIsRefusedEvenPastTheWatermark() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        zero(0..<Self.page, of: bytes, in: dir)
        #expect {
            try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        } throws: { error in
            (error as? SpoolError)?.code == .corrupt && (error as? SpoolError)?.message.contains("move the file aside") == true
        }
        #expect(readFile(dir.file(Format.segmentName(0))).count == bytes.count, "nothing was cut")
    }

    /// The same damages to records that were synced are not a power loss's (a synced page is
    /// on the disk): a damaged header still refuses the log, damaged blocks are still reported as
    /// corruption with the blocks after them kept.
    @Test func theSameDamageToSyncedRecordsIsStillCorruption() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: true)
        zero(0..<Self.page, of: bytes, in: dir)
        #expect {
            try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        } throws: { error in
            (error as? SpoolError)?.code == .corrupt && (error as? SpoolError)?.message.contains("move the file aside") == true
        }
        zero(Self.page..<2 * Self.page, of: bytes, in: dir)
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        defer { try? log.close() }
        #expect(log.recoveryReport.tornTail == nil)
        #expect(log.recoveryReport.corruptions.count == 1)
        #expect(log.nextSeq == 40, "the blocks after the damage are kept")
        #expect(notices(try log.readAll()).map(\.kind) == [.corrupt])
        #expect(try !log.verify().isClean)
    }

    /// A log without `SYNCED` (written before the watermark existed) keeps the earlier rules:
    /// damage followed by a valid block is corruption, whether or not it was synced.
    @Test func aLogWithoutAWatermarkKeepsTheEarlierRules() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        try FileManager.default.removeItem(atPath: dir.file(Format.watermarkFileName))
        zero(Self.page..<2 * Self.page, of: bytes, in: dir)
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(log.recoveryReport.tornTail == nil)
        #expect(log.recoveryReport.corruptions.count == 1)
        #expect(log.nextSeq == 40)
        try log.close()
        #expect(DirectoryIO.exists(dir.file(Format.watermarkFileName)), "the open wrote the watermark")
    }

    /// Recovery cut synced records (a torn last block below the watermark): their seqs go to new
    /// records, not synced yet, so opening lowers the watermark to the recovered end; a page of
    /// those new records lost to a power cut is then a torn tail, not corruption.
    @Test func aWatermarkAboveTheRecoveredEndIsLowered() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: true)
        #expect(try SyncWatermark.read(directory: dir.path) == 40)
        let cut = try #require(blockHeaders(bytes).first { $0.offset > Self.page })
        writeFile(dir.file(Format.segmentName(0)), Array(bytes[..<(cut.offset + 10)]))
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(log.nextSeq == cut.header.firstSeq)
        #expect(try SyncWatermark.read(directory: dir.path) == cut.header.firstSeq)
        for _ in 0..<40 { try await log.append(noisyPayload(Int(log.nextSeq), size: 600), durability: .written) }
        try log.close()
        let rewritten = readFile(dir.file(Format.segmentName(0)))
        let lost = (cut.offset / Self.page + 1) * Self.page
        zero(lost..<lost + Self.page, of: rewritten, in: dir)
        let torn = try #require(blockHeaders(rewritten).first { $0.offset + $0.header.totalSize > lost })
        #expect(torn.header.firstSeq >= cut.header.firstSeq, "the lost page holds only records written after the cut")
        #expect(torn.header.firstSeq < 40, "below the old watermark: only its lowering makes this a power cut's hole")
        let reopened = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(reopened.recoveryReport.corruptions.isEmpty)
        #expect(reopened.recoveryReport.powerCutHoles.first?.records.lowerBound == torn.header.firstSeq)
        #expect(reopened.nextSeq == cut.header.firstSeq + 40, "the blocks after the hole are kept")
        try reopened.close()
    }

    /// The watermark follows every sync, and opening sets it to the recovered end.
    @Test func theWatermarkFollowsSyncsAndOpening() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(try SyncWatermark.read(directory: dir.path) == 0)
        for i in 0..<5 { try await log.append(noisyPayload(i, size: 600), durability: .written) }
        #expect(try SyncWatermark.read(directory: dir.path) == 0, "written is not synced")
        try await log.append(noisyPayload(5, size: 600), durability: .synced)
        #expect(try SyncWatermark.read(directory: dir.path) == 6)
        for i in 6..<9 { try await log.append(noisyPayload(i, size: 600), durability: .written) }
        try log.close()
        #expect(try SyncWatermark.read(directory: dir.path) == 6)
        try withEventLog(directory: dir.path) { _ in }
        #expect(try SyncWatermark.read(directory: dir.path) == 9, "opening syncs the active segment")
    }
}
