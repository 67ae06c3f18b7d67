import Foundation
import Testing
@testable import Spool

/// A golden segment checked into Tests/SpoolTests/Golden pins format version 1: it is decoded
/// byte by byte here, with the same field offsets FORMAT.md gives, and read by the library.
/// Regenerate (only for a new format version) with SPOOL_WRITE_GOLDEN=<path of Golden/>.
@Suite struct GoldenTests {
    static let logID = LogID(hex: "00112233445566778899aabbccddeeff")!
    static let goldenRecords: [(Int64, String)] = [
        (1_767_225_600_000, #"{"event":"app_start"}"#),
        (1_767_225_600_250, #"{"event":"screen_view","screen":"home"}"#),
        (1_767_225_601_000, #"{"event":"click","target":"buy"}"#),
    ]

    /// Builds the golden segment: header, one zstd block of three records, one stored block of one.
    static func build() throws -> [UInt8] {
        var bytes = SegmentHeader(baseSeq: 0, createdMillis: 1_767_225_600_000, logID: logID, version: 1).encoded()
        var first = PendingBlock()
        first.reset(firstSeq: 0)
        for (timestamp, text) in goldenRecords {
            Array(text.utf8).withUnsafeBytes { first.add($0, timestamp: timestamp) }
        }
        let encoder = BlockEncoder(level: 1)
        let segment = SegmentContext(baseSeq: 0, createdMillis: 1_767_225_600_000, version: 1)
        try encoder.encode(first, in: segment, into: &bytes)
        var second = PendingBlock()
        second.reset(firstSeq: 3)
        Array("bye".utf8).withUnsafeBytes { second.add($0, timestamp: 1_767_225_602_000) }
        try encoder.encode(second, in: segment, into: &bytes)
        return bytes
    }

    static var goldenPath: String {
        Bundle.module.path(forResource: "Golden", ofType: nil)! + "/00000000000000000000.seg"
    }

    @Test func goldenSegmentDecodesFieldByField() throws {
        if let out = ProcessInfo.processInfo.environment["SPOOL_WRITE_GOLDEN"] {
            writeFile(out + "/00000000000000000000.seg", try Self.build())
        }
        let golden = GoldenBytes(readFile(Self.goldenPath))
        let bytes = golden.bytes
        let (u16, u32, u64) = (golden.u16, golden.u32, golden.u64)
        // Segment header.
        #expect(Array(bytes[0..<8]) == Array("SPOOLSEG".utf8))
        #expect(u16(8) == 1)
        #expect(u16(10) == 64)
        #expect(u32(12) == 0)
        #expect(u64(16) == 0)
        #expect(u64(24) == 1_767_225_600_000)
        #expect(Array(bytes[32..<48]) == Self.logID.bytes)
        #expect(bytes[48..<60].allSatisfy { $0 == 0 })
        #expect(u32(60) == CRC32C.checksum(Array(bytes[0..<60])))
        // First block: zstd, three records.
        var o = 64
        #expect(Array(bytes[o..<o + 4]) == Array("SPBK".utf8))
        #expect(bytes[o + 4] == 1)
        #expect(bytes[o + 5] == 0)
        #expect(u64(o + 8) == 0)
        #expect(u32(o + 16) == 3)
        let stored = Int(u32(o + 20))
        let raw = Int(u32(o + 24))
        #expect(u32(o + 28) == 0)
        #expect(u32(o + 36) == CRC32C.checksum(Array(bytes[o..<o + 36])))
        #expect(u32(o + 32) == CRC32C.checksum(Array(bytes[o + 40..<o + 40 + stored])))
        // The payload is one zstd frame (magic 28 B5 2F FD) of the records area.
        #expect(Array(bytes[o + 40..<o + 44]) == [0x28, 0xB5, 0x2F, 0xFD])
        var area = [UInt8](repeating: 0, count: raw)
        let ok = bytes.withUnsafeBytes { source in
            area.withUnsafeMutableBytes { ZstdDecompressor().decompress(UnsafeRawBufferPointer(rebasing: source[o + 40..<o + 40 + stored]), into: $0) }
        }
        #expect(ok)
        // Records area: varint length, varint zigzag(timestamp delta), payload.
        var records = GoldenBytes(area)
        var previous: Int64 = 0
        for (timestamp, text) in Self.goldenRecords {
            let length = Int(records.varint())
            previous += records.zigzagVarint()
            #expect(previous == timestamp)
            #expect(records.take(length) == Array(text.utf8))
        }
        #expect(records.cursor == raw)
        // Second block: stored uncompressed (codec 0), one record.
        o += 40 + stored
        #expect(bytes[o + 4] == 0)
        #expect(u64(o + 8) == 3)
        #expect(u32(o + 16) == 1)
        #expect(u32(o + 20) == u32(o + 24))
        #expect(o + 40 + Int(u32(o + 20)) == bytes.count)
    }

    @Test func goldenSegmentReadsThroughTheLibrary() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        copyItem(Self.goldenPath, to: dir.file("00000000000000000000.seg"))
        let log = try EventLog.open(directory: dir.path)
        #expect(log.id == Self.logID)
        let read = records(try log.readAll())
        #expect(read.map(\.seq) == [0, 1, 2, 3])
        #expect(read.map(\.timestamp) == Self.goldenRecords.map(\.0) + [1_767_225_602_000])
        #expect(read.map { String(decoding: $0.payload, as: UTF8.self) } == Self.goldenRecords.map(\.1) + ["bye"])
        try log.close()
    }
}
