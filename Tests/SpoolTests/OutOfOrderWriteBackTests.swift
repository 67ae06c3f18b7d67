import Foundation
import Testing
@testable import Spool

/// A power cut after appends at `written`, when the page cache wrote a later page of the active
/// segment back and not an earlier one (issue 36): the earlier page reads as zeros. The records
/// were never synced, so losing them is allowed; the log must still open, append and verify
/// clean (FORMAT.md §6, "The synced watermark"). The same damage to synced records is still
/// corruption, reported as before.
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

    /// Opens the log, checks that it reads without a corrupt notice from `firstSeq`, appends and
    /// verifies clean; returns the next seq it found.
    func opensReadsAndAppends(_ dir: TemporaryDirectory, _ context: String) throws -> UInt64 {
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        defer { try? log.close() }
        let items = try log.readAll()
        #expect(notices(items).isEmpty, "\(context): \(notices(items))")
        let next = log.nextSeq
        #expect(records(items).map(\.seq) == Array(0..<next), "\(context)")
        #expect(records(items).allSatisfy { $0.payload == noisyPayload(Int($0.seq), size: 600) }, "\(context)")
        #expect(try log.appendBlocking(noisyPayload(Int(next), size: 600), durability: .synced) == next, "\(context)")
        #expect(try log.verify().isClean, "\(context)")
        return next
    }

    /// The first kind: the header's page was not written back, later pages were. Nothing of the
    /// segment was ever synced but its header, so it is a torn tail from offset 0: rewritten
    /// empty, every record lost to the power loss (they were only `written`).
    @Test func anUnsyncedSegmentWhoseFirstPageIsLostOpensAndAppends() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        zero(0..<Self.page, of: bytes, in: dir)
        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(snapshot.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: 0, bytes: Int64(bytes.count)))
        #expect(try snapshot.verify().isClean, "a torn tail is not corruption, before a writer repairs it too")
        snapshot.close()
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(log.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: 0, bytes: Int64(bytes.count)))
        #expect(log.recoveryReport.corruptions.isEmpty)
        try log.close()
        #expect(try opensReadsAndAppends(dir, "header page lost") == 0)
    }

    /// The second kind: a page inside the blocks was not written back, later ones were. The
    /// records there were never synced: a torn tail, cut where the damage starts (the valid
    /// blocks after it go with it), not corruption reported for ever.
    @Test func unsyncedBlocksTornByALostPageAreATornTailNotCorruption() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let bytes = try await appendForty(dir, synced: false)
        zero(Self.page..<2 * Self.page, of: bytes, in: dir)
        let torn = try #require(blockHeaders(bytes).first { $0.offset + $0.header.totalSize > Self.page })
        #expect(blockHeaders(bytes).contains { $0.offset >= 2 * Self.page }, "valid blocks follow the damage")
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(log.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: Int64(torn.offset),
                                                     bytes: Int64(bytes.count - torn.offset)))
        #expect(log.recoveryReport.corruptions.isEmpty)
        #expect(log.nextSeq == torn.header.firstSeq)
        try log.close()
        #expect(try opensReadsAndAppends(dir, "a page inside the blocks lost") == torn.header.firstSeq)
    }

    /// The same two damages to records that were synced are not a power loss's (a synced page is
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
        #expect(torn.header.firstSeq < 40, "below the old watermark: only its lowering makes this a torn tail")
        let reopened = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(reopened.recoveryReport.corruptions.isEmpty)
        #expect(reopened.recoveryReport.tornTail?.offset == Int64(torn.offset))
        #expect(reopened.nextSeq == torn.header.firstSeq)
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
