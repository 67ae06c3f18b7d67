import Foundation
import Testing
@testable import Spool

/// Recovery attacks the format byte by byte: torn tails at every offset, flipped bits in
/// headers and payloads, garbage and empty files.
@Suite struct RecoveryTests {
    /// `blocks` blocks of `perBlock` records, each acknowledged at `written` before the next:
    /// the segment's bytes and each block's (end offset, end seq).
    func makeLog(_ dir: TemporaryDirectory, blocks: Int, perBlock: Int) throws -> (bytes: [UInt8], blockEnds: [(offset: Int, endSeq: UInt64)]) {
        let (bytes, ends) = try writeAcknowledgedBlocks(dir, configuration: smallConfiguration(blockSize: 64 * 1024), blocks: blocks, perBlock: perBlock)
        return (bytes, ends)
    }

    @Test func tornTailIsTruncatedOnOpenAtEveryOffset() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 3, perBlock: 5)
        let segment = dir.file(Format.segmentName(0))
        #expect(ends.last!.offset == bytes.count)
        for cut in Format.segmentHeaderSize..<bytes.count {
            writeFile(segment, Array(bytes[0..<cut]))
            let log = try EventLog.open(directory: dir.path)
            // Every block wholly before the cut survives; the rest was never acknowledged.
            let survivors = ends.last { $0.offset <= cut }?.endSeq ?? 0
            let items = try log.readAll()
            #expect(notices(items).isEmpty, "cut at \(cut)")
            #expect(records(items).map(\.payload) == (0..<Int(survivors)).map { payload($0) }, "cut at \(cut)")
            #expect(log.nextSeq == survivors, "cut at \(cut)")
            let validEnd = ends.last { $0.offset <= cut }?.offset ?? Format.segmentHeaderSize
            if cut > validEnd {
                #expect(log.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: Int64(validEnd), bytes: Int64(cut - validEnd)), "cut at \(cut)")
            } else {
                #expect(log.recoveryReport.tornTail == nil, "cut at \(cut)")
            }
            // Seqs continue without a gap or reuse.
            #expect(try log.appendBlocking(payload(999), durability: .written) == survivors)
            try log.close()
        }
    }

    /// Recovery reads the active segment through the reader's window, a read call per 64 KiB,
    /// not two per block (a header, then a payload): opening after a crash read a full 16 MiB
    /// active segment in ~4,800 calls, which made it the slowest part of opening. And the search
    /// for a valid block after the torn one stops at the segment's end instead of re-reading
    /// its last bytes one offset at a time (~20 calls).
    @Test func recoveryReadsTheActiveSegmentInWindowsNotABlockAtATime() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let (bytes, ends) = try makeLog(dir, blocks: 300, perBlock: 1)
        #expect(ends.last!.offset == bytes.count)  // one segment holds them all
        writeFile(dir.file(Format.segmentName(0)), Array(bytes.dropLast(3)))
        // The whole open may make 12 read calls; a block at a time would take 600.
        FaultInjection.arm(.read, under: dir.path, after: 12, times: .max, fault: .error(.ioError))
        let log = try EventLog.open(directory: dir.path)
        FaultInjection.disarm(under: dir.path)
        #expect(log.nextSeq == ends[ends.count - 2].endSeq)
        #expect(log.recoveryReport.tornTail?.offset == Int64(ends[ends.count - 2].offset))
        #expect(records(try log.readAll()).count == 299)
        try log.close()
    }

    @Test func truncatedSegmentHeaderIsRewrittenEmpty() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        for cut in 0..<Format.segmentHeaderSize {
            _ = try? FileManager.default.removeItem(atPath: dir.path)
            let (bytes, _) = try makeLog(dir, blocks: 1, perBlock: 3)
            writeFile(dir.file(Format.segmentName(0)), Array(bytes[0..<cut]))
            let log = try EventLog.open(directory: dir.path)
            #expect(log.nextSeq == 0, "cut at \(cut)")
            #expect(try log.readAll().isEmpty)
            #expect(try log.appendBlocking(payload(0), durability: .written) == 0)
            try log.close()
        }
    }

    @Test func flippedBitInAnyBlockByteOfASealedSegmentReportsExactlyThatBlocksRange() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        // Several segments: records of ~1 KiB, 1 KiB blocks, 64 KiB segments.
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<400 { try log.append(noisyPayload(i, size: 1000 + i)) }
        try log.syncBlocking()
        try log.close()
        let segments = dir.segments()
        #expect(segments.count >= 3)
        let sealed = dir.file(segments[0])
        let original = readFile(sealed)
        // Map block offsets of the first segment.
        let blocks = blockHeaders(original)
        #expect(blocks.count >= 3)
        #expect(blocks.last.map { $0.offset + $0.header.totalSize } == original.count)
        let victim = blocks[1]
        var generator = SeededGenerator(seed: 7)
        let positions = [victim.offset, victim.offset + 4, victim.offset + 8, victim.offset + 20, victim.offset + 36, victim.offset + 39,
                         victim.offset + 40, victim.offset + victim.header.totalSize - 1] + (0..<12).map { _ in
            victim.offset + Int.random(in: 0..<victim.header.totalSize, using: &generator)
        }
        for position in positions {
            var damaged = original
            damaged[position] ^= 0x10
            writeFile(sealed, damaged)
            let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
            let items = try reopened.readAll()
            let lost = notices(items)
            #expect(lost.count == 1, "flip at \(position)")
            #expect(lost.first?.kind == .corrupt)
            #expect(lost.first?.range == victim.header.firstSeq..<victim.header.endSeq, "flip at \(position)")
            let expected = (0..<400).filter { UInt64($0) < victim.header.firstSeq || UInt64($0) >= victim.header.endSeq }
            #expect(records(items).map(\.payload) == expected.map { noisyPayload($0, size: 1000 + $0) }, "flip at \(position)")
            // A reader starting after the damaged block (a consumer's committed offset) walks
            // the segment from its first block: it must pass the damage, not lose the rest.
            let later = victim.header.endSeq + 3
            let fromLater = try reopened.readAll(from: later)
            #expect(notices(fromLater).isEmpty, "flip at \(position)")
            #expect(records(fromLater).map(\.seq) == Array(later..<400), "flip at \(position)")
            let report = try reopened.verify()
            #expect(!report.isClean)
            #expect(report.corrupt.map(\.range) == [victim.header.firstSeq..<victim.header.endSeq])
            try reopened.close()
        }
        writeFile(sealed, original)
    }

    /// A consumer's offset passed records a power loss then cut (its fast commit reached the
    /// disk, the data did not): seqs skip ahead past the offset, and readers see the gap as
    /// missing, at once, before anything new is appended.
    @Test func seqsSkippedAfterAPowerLossReadAsMissingAtOnce() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try writeLogWithOffsetPastItsRecords(dir)
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.nextSeq == 15)
        let items = try reopened.readAll()
        #expect(records(items).map(\.seq) == Array(0..<10))
        #expect(notices(items).map(\.kind) == [.missing])
        #expect(notices(items).map(\.range) == [10..<15])
        #expect(try reopened.appendBlocking(payload(15), durability: .written) == 15)
        #expect(records(try reopened.readAll(from: 10)).map(\.seq) == [15])
        try reopened.close()
    }

    /// Damage whose bytes happen to hold compact-magic bytes (0xC5) where a 1 MiB scan chunk
    /// ends: each must cost what its header claims, not the rest of the segment, so the search
    /// still finds the valid block after 6 MiB of such damage (before the fix: ~210 MiB
    /// charged against a 76 MiB budget).
    @Test func resyncPastMagicBytesAtChunkEdgesFindsTheNextBlock() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, _) = try makeLog(dir, blocks: 2, perBlock: 5)
        let header = Array(bytes[0..<Format.segmentHeaderSize])
        let blocks = Array(bytes[Format.segmentHeaderSize...])
        var damage = [UInt8](repeating: 0, count: 6 << 20)
        // Where the scan's chunks (1 MiB + 4 bytes, stepping 1 MiB + 1) ended before the fix.
        var chunkStart = 0
        for _ in 0..<6 {
            for j in 0..<14 where chunkStart + (1 << 20) + 4 - 17 + j < damage.count {
                damage[chunkStart + (1 << 20) + 4 - 17 + j] = Format.compactBlockMagic
            }
            chunkStart += (1 << 20) + 1
        }
        let path = dir.file("probe.seg")
        writeFile(path, header + damage + blocks)
        let reader = try SegmentReader(path: path, baseSeq: 0, limit: Int64(header.count + damage.count + blocks.count))
        let found = try reader.resync(after: Int64(Format.segmentHeaderSize) - 1)
        #expect(found?.offset == Int64(header.count + damage.count))
    }

    /// 6 MiB of damage with one block magic repeated (0xC5, or `SPBK`) in the last bytes of
    /// every 1 MiB scan chunk: a header cut off by a chunk's end is parsed whole by the next
    /// chunk and must cost nothing there (before the fix each was charged the rest of the
    /// segment, ~200 MiB in all against a 77 MiB budget, and opening failed with "too many
    /// forged block headers").
    @Test func magicBytesWhereScanChunksEndAreNotChargedTheRestOfTheSegment() throws {
        for magic in [[Format.compactBlockMagic], Format.blockMagic] {
            let dir = TemporaryDirectory()
            defer { dir.cleanup() }
            let (bytes, ends) = try makeLog(dir, blocks: 2, perBlock: 5)
            var damage = [UInt8](repeating: 0, count: 6 << 20)
            // The scan starts a byte into the damage; its chunks are 1 MiB + 4 bytes and overlap
            // by 39. Magic fills 256 bytes around each chunk's end.
            var chunkEnd = 1 + (1 << 20) + 4
            while chunkEnd + 128 < damage.count {
                for j in 0..<256 { damage[chunkEnd - 128 + j] = magic[j % magic.count] }
                chunkEnd += (1 << 20) + 4 - 39
            }
            writeFile(dir.file(Format.segmentName(0)), Array(bytes[..<ends[0].offset]) + damage + Array(bytes[ends[0].offset...]))
            let log = try EventLog.open(directory: dir.path)
            #expect(log.recoveryReport.tornTail == nil, "magic \(magic)")
            #expect(log.recoveryReport.corruptions.count == 1, "magic \(magic)")
            #expect(log.nextSeq == ends[1].endSeq, "magic \(magic): the block after the damage is kept")
            let items = try log.readAll()
            #expect(notices(items).isEmpty, "magic \(magic): the damage holds no seqs")
            #expect(records(items).map(\.seq) == Array(0..<ends[1].endSeq), "magic \(magic)")
            try log.close()
        }
    }

    /// Damage, then a byte copy of an earlier block (valid, but its seqs are behind), then a
    /// valid block that continues the seqs: recovery passes over the stale copy as readers do,
    /// keeps the last block, and seqs go on after it (before the fix it cut the segment at the
    /// damage: the last block's records were lost and their seqs given to new records).
    @Test func aStaleBlockCopyAfterDamageDoesNotHideTheBlocksThatContinueTheSeqs() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 3, perBlock: 4)
        let firstBlock = Array(bytes[Format.segmentHeaderSize..<ends[0].offset])
        let damaged = Array(bytes[..<ends[1].offset]) + [UInt8](repeating: 0x01, count: 10) + firstBlock + Array(bytes[ends[1].offset...])
        writeFile(dir.file(Format.segmentName(0)), damaged)
        let log = try EventLog.open(directory: dir.path)
        #expect(log.recoveryReport.tornTail == nil)
        #expect(log.recoveryReport.corruptions.count == 1)
        #expect(log.nextSeq == ends[2].endSeq)
        let items = try log.readAll()
        #expect(records(items).map(\.seq) == Array(0..<ends[2].endSeq))
        #expect(records(items).last?.payload == payload(Int(ends[2].endSeq) - 1))
        #expect(try log.append(payload(99)) == ends[2].endSeq)
        try log.close()
        #expect(readFile(dir.file(Format.segmentName(0))).starts(with: damaged), "nothing of the segment was cut")
    }

    /// 4 MiB of forged block headers, one every 40 bytes, each with a valid header CRC and a
    /// stored length claiming the rest of the file: checking each candidate's payload would
    /// read ~200 GB. The search gives up after its budget and opening fails with `corrupt`
    /// naming the file, instead of hanging.
    @Test func forgedBlockHeadersMakeOpenFailNotHang() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 2, perBlock: 5)
        let forgedLength = 4 << 20
        var forged = bytes + [UInt8](repeating: 0, count: forgedLength)
        let fileEnd = forged.count
        var offset = bytes.count
        while offset + Format.blockHeaderSize <= fileEnd {
            let stored = min(Format.maxStoredLength, fileEnd - offset - Format.blockHeaderSize)
            let header = BlockHeader(codec: Format.codecZstd, flags: 0, firstSeq: ends.last!.endSeq, recordCount: 1,
                                     storedLength: UInt32(stored), rawLength: 100, dictionaryID: 0, payloadCRC: 0)
            header.store(into: &forged, at: offset)
            offset += Format.blockHeaderSize
        }
        writeFile(dir.file(Format.segmentName(0)), forged)
        #expect {
            try EventLog.open(directory: dir.path)
        } throws: { error in
            let error = error as? SpoolError
            return error?.code == .corrupt && error?.message.contains("forged") == true && error?.path?.hasSuffix(Format.segmentName(0)) == true
        }
    }

    @Test func corruptionInsideTheActiveSegmentIsReportedNotTruncated() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 4, perBlock: 6)
        var damaged = bytes
        let start = ends[0].offset
        for i in start..<(start + 30) { damaged[i] = 0 }  // zero a range inside block 2
        writeFile(dir.file(Format.segmentName(0)), damaged)
        let log = try EventLog.open(directory: dir.path)
        #expect(log.recoveryReport.tornTail == nil)
        #expect(log.nextSeq == ends.last!.endSeq, "the valid blocks after the damage are kept")
        let items = try log.readAll()
        #expect(notices(items).map(\.range) == [ends[0].endSeq..<ends[1].endSeq])
        #expect(records(items).count == Int(ends.last!.endSeq - (ends[1].endSeq - ends[0].endSeq)))
        // From a seq in a block after the damage: every record from there, no notice.
        let later = ends[2].endSeq + 1
        let fromLater = try log.readAll(from: later)
        #expect(notices(fromLater).isEmpty)
        #expect(records(fromLater).map(\.seq) == Array(later..<ends.last!.endSeq))
        try log.close()
    }

    /// Recovery checks each payload's CRC where it lies in the read window, without copying it:
    /// a flipped payload byte in the last block is a torn tail; in an earlier block, damage
    /// reported with the blocks after it kept.
    @Test func aFlippedPayloadByteInTheActiveSegmentIsCaughtByRecovery() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 3, perBlock: 4)
        let segment = dir.file(Format.segmentName(0))
        for block in 0..<3 {
            let blockStart = block == 0 ? Format.segmentHeaderSize : ends[block - 1].offset
            let blockEnd = ends[block].offset
            var damaged = bytes
            damaged[blockEnd - 1] ^= 0x01  // the payload's last byte
            writeFile(segment, damaged)
            let log = try EventLog.open(directory: dir.path)
            if block == 2 {
                #expect(log.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: Int64(blockStart), bytes: Int64(blockEnd - blockStart)))
                #expect(log.nextSeq == ends[1].endSeq)
            } else {
                #expect(log.recoveryReport.tornTail == nil, "block \(block)")
                #expect(log.recoveryReport.corruptions.count == 1, "block \(block)")
                #expect(log.nextSeq == ends[2].endSeq, "block \(block)")
            }
            try log.close()
        }
    }

    @Test func garbageEmptyAndForeignFilesNeverCrashOrHang() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<300 { try log.append(noisyPayload(i, size: 1000)) }
        try log.syncBlocking()
        try log.close()
        let segments = dir.segments()
        #expect(segments.count >= 3)
        // Garbage, a zero-length sealed segment in the middle, and an unrelated file.
        writeFile(dir.file("notes.txt"), Array("hello".utf8))
        let middle = dir.file(segments[1])
        writeFile(middle, [])
        var generator = SeededGenerator(seed: 3)
        writeFile(dir.file(segments[0]), (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.recoveryReport.ignoredFiles == ["notes.txt"])
        let items = try reopened.readAll()
        let lost = notices(items)
        #expect(lost.allSatisfy { $0.kind == .corrupt })
        let base1 = Format.baseSeq(ofSegmentNamed: segments[1])!
        let base2 = Format.baseSeq(ofSegmentNamed: segments[2])!
        // The emptied middle segment is a real one cut by damage (its name does not overlap
        // the segment before it): kept, and its records read as corrupt, not set aside.
        #expect(base1 < base2)
        #expect(reopened.recoveryReport.setAsideSegments.isEmpty)
        #expect(lost.map(\.range) == [0..<base1, base1..<base2])
        #expect(records(items).first?.seq == base2)
        #expect(records(items).last?.seq == 299)
        try reopened.close()
    }

    /// Makes a log holding `payload(0)`, synced, and closes it; returns its id.
    private func oneSyncedRecord(_ dir: TemporaryDirectory) throws -> LogID {
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(0), durability: .synced)
        let id = log.id
        try log.close()
        return id
    }

    @Test func damagedMetaIsRecoveredFromSegmentHeaders() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let id = try oneSyncedRecord(dir)
        writeFile(dir.file("META"), [1, 2, 3])
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.id == id)
        #expect(records(try reopened.readAll()).count == 1)
        try reopened.close()
    }

    /// A flipped bit in META's version bytes is damage (its CRC fails): META is rebuilt from a
    /// segment header as for a flip anywhere else. Only an intact META of a newer version is
    /// refused (before the fix the version was read first: the log would not open).
    @Test func aFlippedBitInMetasVersionIsDamageNotANewerVersion() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let id = try oneSyncedRecord(dir)
        let meta = readFile(dir.file(Format.metaFileName))
        var flipped = meta
        flipped[9] ^= 0x01  // version 257
        writeFile(dir.file(Format.metaFileName), flipped)
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.id == id)
        #expect(records(try reopened.readAll()).count == 1)
        try reopened.close()
        #expect(MetaRecord.parse(readFile(dir.file(Format.metaFileName)))?.logID == id, "rebuilt")

        var newer = meta
        newer[8] = 2
        newer.storeLE(CRC32C.checksum(Array(newer[0..<60])), at: 60)
        writeFile(dir.file(Format.metaFileName), newer)
        #expect { try EventLog.open(directory: dir.path) } throws: { error in
            let e = error as! SpoolError
            return e.code == .unsupportedVersion && e.message.contains("META format version 2")
        }
    }

    @Test func aDamagedMetaWithNoSegmentIsReportedNotTakenForANewLog() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        let id = log.id
        try log.close()
        for segment in dir.segments() { try FileManager.default.removeItem(atPath: dir.file(segment)) }
        writeFile(dir.file(Format.metaFileName), [1, 2, 3])
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.id != id)
        #expect(!reopened.recoveryReport.created)
        #expect(reopened.recoveryReport.corruptions.contains { $0.contains("a new log id was made") })
        try reopened.close()
    }

    @Test func newerSegmentVersionIsRefusedClearly() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, _) = try makeLog(dir, blocks: 1, perBlock: 2)
        var newer = bytes
        newer[8] = 9  // version 9
        let crc = CRC32C.checksum(Array(newer[0..<60]))
        newer.storeLE(crc, at: 60)
        writeFile(dir.file(Format.segmentName(0)), newer)
        #expect { try EventLog.open(directory: dir.path) } throws: { error in
            let e = error as! SpoolError
            return e.code == .unsupportedVersion && e.message.contains("9")
        }
    }
}
