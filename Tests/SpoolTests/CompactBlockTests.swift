import Foundation
import Testing
@testable import Spool

/// Compact block headers (FORMAT.md §3.2): the golden version-2 segment decoded byte by byte,
/// when the writer picks each form, and recovery over compact blocks (torn at every byte,
/// flipped at every byte).
@Suite struct CompactBlockTests {
    static let logID = LogID(hex: "00112233445566778899aabbccddeeff")!
    static let created: Int64 = 1_767_225_600_000
    static let texts = [#"{"event":"screen_view","screen":"home","user":"u-1"}"#, #"{"event":"screen_view","screen":"cart","user":"u-1"}"#]

    /// A version-2 segment based at seq 100: a compact zstd block of two records, then a
    /// compact stored block (codec 0) of one.
    static func build() throws -> [UInt8] {
        var bytes = SegmentHeader(baseSeq: 100, createdMillis: created, logID: logID).encoded()
        let segment = SegmentContext(baseSeq: 100, createdMillis: created)
        let encoder = BlockEncoder(level: 1)
        var first = PendingBlock()
        first.reset(firstSeq: 100)
        for (index, text) in texts.enumerated() {
            Array(text.utf8).withUnsafeBytes { first.add($0, timestamp: created + 1500 + Int64(index) * 250) }
        }
        try encoder.encode(first, in: segment, into: &bytes)
        var second = PendingBlock()
        second.reset(firstSeq: 102)
        // Before the segment's created ms: the rebased delta is negative.
        Array("bye".utf8).withUnsafeBytes { second.add($0, timestamp: created - 2000) }
        try encoder.encode(second, in: segment, into: &bytes)
        return bytes
    }

    static var goldenPath: String {
        Bundle.module.path(forResource: "Golden", ofType: nil)! + "/compact/00000000000000000100.seg"
    }

    @Test func goldenCompactSegmentDecodesFieldByField() throws {
        if let out = ProcessInfo.processInfo.environment["SPOOL_WRITE_COMPACT_GOLDEN"] {
            writeFile(out + "/00000000000000000100.seg", try Self.build())
        }
        let golden = GoldenBytes(readFile(Self.goldenPath))
        let bytes = golden.bytes
        let (u16, u32, u64) = (golden.u16, golden.u32, golden.u64)
        // Segment header, version 2.
        #expect(Array(bytes[0..<8]) == Array("SPOOLSEG".utf8))
        #expect(u16(8) == 2)
        #expect(u64(16) == 100)
        #expect(u64(24) == UInt64(Self.created))
        // First block: compact header.
        var o = 64
        #expect(bytes[o] == 0xC5)
        #expect(bytes[o + 1] == 0x01)  // codec 1 (zstd), flags 0
        #expect(bytes[o + 2] == 2)  // records
        #expect(bytes[o + 3] == 0)  // no dictionary
        #expect(u32(o + 4) == 0)  // first seq 100 = base + 0
        let stored = Int(u16(o + 8))
        let raw = Int(u16(o + 10))
        #expect(u32(o + 12) == CRC32C.checksum(Array(bytes[o + 18..<o + 18 + stored])))
        #expect(u16(o + 16) == UInt16(truncatingIfNeeded: CRC32C.checksum(Array(bytes[o..<o + 16]))))
        // The payload is a zstd frame without its magic number: put it back to decode.
        #expect(Array(bytes[o + 18..<o + 22]) != [0x28, 0xB5, 0x2F, 0xFD])
        let frame = [0x28, 0xB5, 0x2F, 0xFD] + Array(bytes[o + 18..<o + 18 + stored])
        #expect(frame[4] & 0xC0 == 0, "frame header descriptor: no content size field")
        var area = [UInt8](repeating: 0, count: raw)
        let ok = frame.withUnsafeBytes { source in area.withUnsafeMutableBytes { ZstdDecompressor().decompress(source, into: $0) } }
        #expect(ok)
        // Records area as in a full block, but the first timestamp is a delta from the segment's created ms.
        var records = GoldenBytes(area)
        var previous = Self.created
        for (index, text) in Self.texts.enumerated() {
            let length = Int(records.varint())
            previous += records.zigzagVarint()
            #expect(previous == Self.created + 1500 + Int64(index) * 250)
            #expect(records.take(length) == Array(text.utf8))
        }
        #expect(records.cursor == raw)
        // Second block: compact, stored (codec 0), seq 102, timestamp 2 s before the segment's.
        o += 18 + stored
        #expect(bytes[o] == 0xC5)
        #expect(bytes[o + 1] == 0x00)
        #expect(bytes[o + 2] == 1)
        #expect(u32(o + 4) == 2)
        #expect(u16(o + 8) == u16(o + 10))
        // One record: no length, just the timestamp delta and the payload.
        var bye = GoldenBytes(Array(bytes[o + 18..<o + 18 + Int(u16(o + 8))]))
        #expect(bye.zigzagVarint() == -2000)
        #expect(bye.take(bye.bytes.count - bye.cursor) == Array("bye".utf8))
        #expect(o + 18 + Int(u16(o + 8)) == bytes.count)
    }

    @Test func goldenCompactSegmentReadsThroughTheLibrary() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        copyItem(Self.goldenPath, to: dir.file("00000000000000000100.seg"))
        let log = try EventLog.open(directory: dir.path)
        #expect(log.id == Self.logID)
        let read = records(try log.readAll())
        #expect(read.map(\.seq) == [100, 101, 102])
        #expect(read.map(\.timestamp) == [Self.created + 1500, Self.created + 1750, Self.created - 2000])
        #expect(read.map { String(decoding: $0.payload, as: UTF8.self) } == Self.texts + ["bye"])
        try log.close()
    }

    @Test func theWriterPicksTheFormThatFits() throws {
        let encoder = BlockEncoder(level: 1)
        let segment = SegmentContext(baseSeq: 1000, createdMillis: Self.created)
        func encoded(count: Int, size: Int, firstSeq: UInt64 = 1000, in segment: SegmentContext = segment) throws -> BlockHeader {
            var block = PendingBlock()
            block.reset(firstSeq: firstSeq)
            for i in 0..<count { payload(i, size: size).withUnsafeBytes { block.add($0, timestamp: Self.created + Int64(i)) } }
            var out = [UInt8]()
            let header = try encoder.encode(block, in: segment, into: &out)
            #expect(out.count == header.totalSize)
            return header
        }
        #expect(try encoded(count: 1, size: 300).form == .compact)
        #expect(try encoded(count: 255, size: 10).form == .compact)
        #expect(try encoded(count: 256, size: 10).form == .full, "more records than a byte counts")
        #expect(try encoded(count: 1, size: 70_000).form == .full, "a records area over 64 KiB")
        #expect(try encoded(count: 1, size: 300, firstSeq: 1000 + (1 << 32)).form == .full, "first seq too far from the base")
        #expect(try encoded(count: 1, size: 300, in: SegmentContext(baseSeq: 1000, createdMillis: Self.created, version: 1)).form == .full,
                "a version-1 segment holds full headers only")
    }

    @Test func compactAndFullBlocksMixInOneSegmentAndReadBackInOrder() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 64 * 1024, segmentSize: 4 << 20))
        var expected = [[UInt8]]()
        for round in 0..<6 {
            // A few trickled records (one compact block each), then a burst that fills full blocks.
            let trickled = (0..<3).map { payload(round * 1000 + $0) }
            try trickle(log, trickled)
            expected += trickled
            let burst = (0..<400).map { noisyPayload(round * 1000 + 100 + $0, size: 400) }
            for record in burst { try log.append(record) }
            try log.syncBlocking()
            expected += burst
        }
        let forms = Set(blockHeaders(readFile(dir.file(Format.segmentName(0)))).map(\.header.form))
        #expect(forms == [.compact, .full])
        #expect(records(try log.readAll()).map(\.payload) == expected)
        #expect(try log.verify().isClean)
        try log.close()
    }

    @Test func aReopenedVersionOneSegmentGetsFullHeadersOnly() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        copyItem(GoldenTests.goldenPath, to: dir.file("00000000000000000000.seg"))
        let log = try EventLog.open(directory: dir.path)
        try trickle(log, [payload(1), payload(2)])
        #expect(records(try log.readAll()).map(\.seq) == [0, 1, 2, 3, 4, 5])
        try log.close()
        let blocks = blockHeaders(readFile(dir.file("00000000000000000000.seg")))
        #expect(blocks.count == 4)
        #expect(blocks.allSatisfy { $0.header.form == .full })
    }

    /// A log of `count` trickled records, one compact block each, synced; returns the segment's bytes.
    func trickledLog(_ dir: TemporaryDirectory, count: Int) throws -> [UInt8] {
        let log = try EventLog.open(directory: dir.path)
        try trickle(log, (0..<count).map { payload($0, size: 120 + $0) })
        try log.syncBlocking()  // damage to synced blocks is corruption, not a torn tail (FORMAT.md §6)
        try log.close()
        let bytes = readFile(dir.file(Format.segmentName(0)))
        #expect(blockHeaders(bytes).count == count)
        #expect(blockHeaders(bytes).allSatisfy { $0.header.form == .compact })
        return bytes
    }

    @Test func aCompactBlockTornAtEveryByteIsCutAndReported() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let original = try trickledLog(dir, count: 6)
        let last = blockHeaders(original).last!
        for cut in last.offset + 1..<original.count {
            writeFile(dir.file(Format.segmentName(0)), Array(original[0..<cut]))
            let log = try EventLog.open(directory: dir.path)
            #expect(log.recoveryReport.tornTail?.offset == Int64(last.offset), "cut at \(cut)")
            #expect(log.nextSeq == 5, "cut at \(cut)")
            let items = try log.readAll()
            #expect(notices(items).isEmpty)
            #expect(records(items).map(\.payload) == (0..<5).map { payload($0, size: 120 + $0) }, "cut at \(cut)")
            try log.close()
        }
    }

    @Test func aFlipAtEveryByteOfACompactBlockLosesExactlyItsRecord() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let original = try trickledLog(dir, count: 6)
        let victim = blockHeaders(original)[2]
        for position in victim.offset..<victim.offset + victim.header.totalSize {
            var damaged = original
            damaged[position] ^= 0x08
            writeFile(dir.file(Format.segmentName(0)), damaged)
            let log = try EventLog.open(directory: dir.path)
            let items = try log.readAll()
            #expect(notices(items).map(\.kind) == [.corrupt], "flip at \(position)")
            #expect(notices(items).first?.range == 2..<3, "flip at \(position)")
            #expect(records(items).map(\.seq) == [0, 1, 3, 4, 5], "flip at \(position)")
            try log.close()
        }
    }
}
