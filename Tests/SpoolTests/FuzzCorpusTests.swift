import Foundation
import Testing
@testable import Spool

/// Replays the fuzz regression corpus (Tests/SpoolTests/FuzzCorpus, inputs of the `SpoolFuzz`
/// target) through the readers: every input ends in records or a typed `SpoolError`, never a
/// crash or a hang. The first byte of an input says where the rest goes, as in the fuzz target:
/// 0 the active segment, 1 a sealed segment, 2 blocks (CRCs fixed up) after a valid segment
/// header, 3 an offset file, 4 META.
@Suite struct FuzzCorpusTests {
    static let corpus = Bundle.module.path(forResource: "FuzzCorpus", ofType: nil)!

    /// Rewrites the checksums of every block in `bytes` (either header form), walking them by their stored lengths.
    func fixingChecksums(_ bytes: [UInt8]) -> [UInt8] {
        var out = bytes
        var offset = 0
        while offset + Format.compactBlockHeaderSize <= out.count {
            if out[offset] == Format.compactBlockMagic {
                let stored = Int(out.withUnsafeBytes { loadLE($0, offset + 8, as: UInt16.self) })
                let end = min(out.count, offset + Format.compactBlockHeaderSize + stored)
                out.storeLE(CRC32C.checksum(Array(out[offset + Format.compactBlockHeaderSize..<end])), at: offset + 12)
                out.storeLE(UInt16(truncatingIfNeeded: CRC32C.checksum(Array(out[offset..<offset + 16]))), at: offset + 16)
                offset = end
                continue
            }
            guard offset + Format.blockHeaderSize <= out.count else { break }
            let stored = Int(out.withUnsafeBytes { loadLE($0, offset + 20, as: UInt32.self) })
            let end = min(out.count, offset + Format.blockHeaderSize + stored)
            out.storeLE(CRC32C.checksum(Array(out[offset + Format.blockHeaderSize..<end])), at: offset + 32)
            out.storeLE(CRC32C.checksum(Array(out[offset..<offset + 36])), at: offset + 36)
            offset = end
        }
        return out
    }

    /// Places one input in `dir` and reads it every way a log is read.
    func replay(_ input: [UInt8], in dir: TemporaryDirectory) throws -> String {
        guard let first = input.first else { return "empty" }
        let rest = Array(input.dropFirst())
        try? FileManager.default.removeItem(atPath: dir.path)
        try FileManager.default.createDirectory(atPath: dir.path + "/consumers", withIntermediateDirectories: true)
        let header = { (base: UInt64) in SegmentHeader(baseSeq: base, createdMillis: 0, logID: LogID(hex: String(repeating: "0", count: 32))!).encoded() }
        let segment0 = dir.file(Format.segmentName(0))
        switch first % 5 {
        case 0: writeFile(segment0, rest)
        case 1:
            writeFile(segment0, rest)
            writeFile(dir.file(Format.segmentName(100)), header(100))
        case 2: writeFile(segment0, header(0) + fixingChecksums(rest))
        default:
            // A one-block log: records "A" and "B", uncompressed.
            var block = Array("SPBK".utf8) + [UInt8](repeating: 0, count: 36) + [1, 0, 65, 1, 0, 66]
            block.storeLE(UInt32(2), at: 16)
            block.storeLE(UInt32(6), at: 20)
            block.storeLE(UInt32(6), at: 24)
            writeFile(segment0, header(0) + fixingChecksums(block))
            writeFile(first % 5 == 3 ? dir.file("consumers/f.offset") : dir.file("META"), rest)
        }
        do {
            return try withEventLog(directory: dir.path) { log in
                let items = try log.readAll()
                _ = try log.verify()
                let consumer = try log.consumer(named: "f")
                let batch = try consumer.read(maxCount: 10)
                if let last = batch.records.last { try consumer.commit(through: last.seq) }
                return "\(records(items).count) records, \(notices(items).count) notices"
            }
        } catch let error as SpoolError {
            return "\(error.code)"
        }
    }

    @Test func everyCorpusInputEndsInRecordsOrATypedError() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.corpus).sorted()
        #expect(names.count >= 5)
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var outcomes = [String: String]()
        for name in names {
            let input = readFile(Self.corpus + "/" + name)
            // Anything but a SpoolError thrown here fails the test; a crash fails the run.
            outcomes[name] = try replay(input, in: dir)
        }
        // The seeds made from the golden segment still read as the golden segment does.
        #expect(outcomes["seed-active-golden"] == "4 records, 0 notices")
        #expect(outcomes["seed-checked-golden-blocks"] == "4 records, 0 notices")
        #expect(outcomes["seed-offset-two-slots"] == "2 records, 0 notices")
    }
}
