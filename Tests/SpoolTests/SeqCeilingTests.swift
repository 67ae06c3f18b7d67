import Foundation
import Testing
@testable import Spool

/// Seqs read from files are bounded by `Format.seqCeiling`: no offset file, segment name or
/// block header, however crafted, can make the next seq overflow (every later append trapped).
@Suite struct SeqCeilingTests {
    /// A valid block of one uncompressed record (`abc`, timestamp 0) with a full header at `firstSeq`.
    func fullBlock(firstSeq: UInt64) -> [UInt8] {
        let raw: [UInt8] = [3, 0] + Array("abc".utf8)
        let header = BlockHeader(codec: Format.codecNone, flags: 0, firstSeq: firstSeq, recordCount: 1,
                                 storedLength: UInt32(raw.count), rawLength: UInt32(raw.count), dictionaryID: 0,
                                 payloadCRC: CRC32C.checksum(raw))
        var out = [UInt8](repeating: 0, count: Format.blockHeaderSize)
        header.store(into: &out, at: 0)
        return out + raw
    }

    /// A closed log of 10 synced records, with consumer "c" committed through 3.
    func tenRecords(_ dir: TemporaryDirectory) throws {
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.append(payload(i)) }
        try log.syncBlocking()
        try log.consumer(named: "c").commit(upTo: 4)
        try log.close()
    }

    /// An offset file of two slots; nil leaves a slot zeroed (invalid).
    func writeOffsetFile(_ dir: TemporaryDirectory, _ first: OffsetSlot?, _ second: OffsetSlot?) {
        var bytes = [UInt8](repeating: 0, count: Format.offsetFileSize)
        if let first { bytes.replaceSubrange(0..<Format.offsetSlotSize, with: first.encoded()) }
        if let second {
            bytes.replaceSubrange(Format.offsetSlotStride..<Format.offsetSlotStride + Format.offsetSlotSize, with: second.encoded())
        }
        writeFile(dir.file(Format.consumersDirectory + "/c" + Format.offsetSuffix), bytes)
    }

    /// A slot (valid CRC) whose generation is 2^64 − 1 is invalid too: chosen as the newer
    /// slot, it made every later commit trap on `generation + 1`.
    @Test func anOffsetSlotWithAGenerationPastTheCeilingIsInvalid() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try tenRecords(dir)
        // At the ceiling too: its next commit's generation would be past it, unreadable, and
        // every later commit would be lost to the older slot on reopen.
        for generation in [UInt64.max, Format.seqCeiling] {
            writeOffsetFile(dir, OffsetSlot(generation: generation, nextSeq: 6), OffsetSlot(generation: 2, nextSeq: 4))
            let log = try EventLog.open(directory: dir.path)
            let consumer = try log.consumer(named: "c")
            #expect(consumer.committed == 4, "the valid slot wins")
            try consumer.commit(upTo: 8)
            try consumer.commit(upTo: 9)
            #expect(consumer.committed == 9)
            try log.close()
            let reopened = try EventLog.open(directory: dir.path)
            #expect(try reopened.consumer(named: "c").committed == 9)
            try reopened.close()
        }
    }

    /// A slot (valid CRC) whose next seq is 2^64 − 1 is invalid: the other slot wins, or with
    /// none the consumer is reset and reported. The log's seqs go on from its records.
    @Test func anOffsetSlotPastTheCeilingIsInvalid() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try tenRecords(dir)
        writeOffsetFile(dir, OffsetSlot(generation: 1, nextSeq: 4), OffsetSlot(generation: 2, nextSeq: .max))
        var log = try EventLog.open(directory: dir.path)
        #expect(log.nextSeq == 10)
        #expect(log.recoveryReport.resetConsumers.isEmpty)
        #expect(try log.consumer(named: "c").committed == 4, "the older valid slot wins")
        #expect(try log.append(payload(10)) == 10)
        try log.close()

        writeOffsetFile(dir, OffsetSlot(generation: 7, nextSeq: Format.seqCeiling + 1), nil)
        log = try EventLog.open(directory: dir.path)
        #expect(log.recoveryReport.resetConsumers == ["c"])
        #expect(log.nextSeq == 11)
        #expect(try log.consumer(named: "c").committed == 0, "reset to the oldest stored record")
        #expect(try log.append(payload(11)) == 11)
        try log.close()
    }

    /// A file named like a segment past the ceiling, with a valid header of the log, is a
    /// foreign file: ignored and listed, not the active segment.
    @Test func aSegmentNamePastTheCeilingIsNotASegment() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try tenRecords(dir)
        let opened = try EventLog.open(directory: dir.path)
        let id = opened.id
        try opened.close()
        let name = "18446744073709551615.seg"
        writeFile(dir.file(name), SegmentHeader(baseSeq: .max, createdMillis: 0, logID: id).encoded())
        let log = try EventLog.open(directory: dir.path)
        #expect(log.recoveryReport.ignoredFiles == [name])
        #expect(log.nextSeq == 10)
        #expect(try log.append(payload(10)) == 10)
        try log.close()
        #expect(Format.baseSeq(ofSegmentNamed: Format.segmentName(Format.seqCeiling)) == Format.seqCeiling)
        #expect(Format.baseSeq(ofSegmentNamed: "0" + String(Format.seqCeiling + 1) + Format.segmentSuffix) == nil)
    }

    /// A valid block (both CRCs) at the end of the active segment whose first seq is 2^64 − 2
    /// fails its header check: it is a torn tail, cut, and seqs go on from the last real block.
    @Test func aBlockWhoseEndSeqPassesTheCeilingIsATornTail() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try tenRecords(dir)
        let segment = dir.file(Format.segmentName(0))
        let bytes = readFile(segment)
        let forged = fullBlock(firstSeq: UInt64.max - 1)
        writeFile(segment, bytes + forged)
        let log = try EventLog.open(directory: dir.path)
        #expect(log.recoveryReport.tornTail == .init(segment: Format.segmentName(0), offset: Int64(bytes.count), bytes: Int64(forged.count)))
        #expect(log.nextSeq == 10)
        #expect(try log.append(payload(10)) == 10)
        try log.close()

        // The compact form, in a segment based just below the ceiling: the same check.
        var compact = [UInt8](repeating: 0, count: Format.compactBlockHeaderSize)
        BlockHeader(codec: Format.codecNone, flags: 0, firstSeq: Format.seqCeiling, recordCount: 1, storedLength: 4,
                    rawLength: 4, dictionaryID: 0, payloadCRC: 0, form: .compact)
            .store(into: &compact, at: 0, segmentBase: Format.seqCeiling - 1)
        let parsed = compact.withUnsafeBytes { BlockHeader.parse($0, segmentBase: Format.seqCeiling - 1) }
        #expect(parsed == .failure(.badField("end seq passes the seq ceiling")))
        let fits = compact.withUnsafeBytes { BlockHeader.parse($0, segmentBase: Format.seqCeiling - 2) }
        #expect((try? fits.get())?.endSeq == Format.seqCeiling, "an end seq at the ceiling itself is valid")
    }

    /// At the ceiling itself: the last seq below it is appended and stored; the next append
    /// throws `.full` instead of trapping, before and after a reopen.
    @Test func appendsPastTheCeilingThrowFull() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try tenRecords(dir)
        writeOffsetFile(dir, OffsetSlot(generation: 1, nextSeq: Format.seqCeiling - 1), nil)
        var log = try EventLog.open(directory: dir.path)
        #expect(log.nextSeq == Format.seqCeiling - 1)
        #expect(try log.appendBlocking(payload(0), durability: .synced) == Format.seqCeiling - 1)
        #expect { try log.append(payload(1)) } throws: { ($0 as? SpoolError)?.code == .full }
        try log.close()
        log = try EventLog.open(directory: dir.path)
        #expect(log.nextSeq == Format.seqCeiling)
        #expect(records(try log.readAll(from: Format.seqCeiling - 1)).map(\.seq) == [Format.seqCeiling - 1])
        #expect { try log.append(payload(1)) } throws: { ($0 as? SpoolError)?.code == .full }
        try log.close()
    }
}
