import Foundation
import Testing
@testable import Spool

/// Recovery and corruption rules hold for dictionary and encrypted blocks: torn tails are cut
/// without the key, damaged or tampered blocks are reported with exactly their range.
@Suite struct CodecRecoveryTests {
    static let key = codecTestKey(5)

    static func configuration(segmentSize: Int = 64 * 1024) -> Configuration {
        codecConfiguration(dictionary: .provided(codecTestDictionary()), key: key, segmentSize: segmentSize)
    }

    /// `blocks` blocks of `perBlock` records, each block acknowledged before the next.
    func makeLog(_ dir: TemporaryDirectory, blocks: Int, perBlock: Int) throws -> (bytes: [UInt8], ends: [(offset: Int, endSeq: UInt64)]) {
        try writeAcknowledgedBlocks(dir, configuration: Self.configuration(), blocks: blocks, perBlock: perBlock)
    }

    @Test func tornTailIsCutAtEveryOffsetWithoutTheKey() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try makeLog(dir, blocks: 3, perBlock: 3)
        #expect(blockHeaders(bytes).allSatisfy { $0.header.isEncrypted && $0.header.dictionaryID == 1 })
        let segment = dir.file(Format.segmentName(0))
        for cut in Format.segmentHeaderSize..<bytes.count {
            writeFile(segment, Array(bytes[0..<cut]))
            let survivors = ends.last { $0.offset <= cut }?.endSeq ?? 0
            let validEnd = ends.last { $0.offset <= cut }?.offset ?? Format.segmentHeaderSize
            let keyless = try EventLog.open(directory: dir.path)  // no key, no dictionary setting
            #expect(keyless.nextSeq == survivors, "cut at \(cut)")
            #expect(keyless.recoveryReport.tornTail?.offset == (cut > validEnd ? Int64(validEnd) : nil), "cut at \(cut)")
            try keyless.close()
            let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
            let items = try log.readAll()
            #expect(notices(items).isEmpty, "cut at \(cut)")
            #expect(records(items).map(\.payload) == (0..<Int(survivors)).map { payload($0) }, "cut at \(cut)")
            try log.close()
        }
    }

    @Test func flippedBitInASealedEncryptedSegmentReportsExactlyThatBlocksRange() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Self.configuration()
        configuration.blockSize = 4096
        configuration.linger = .zero
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<400 { try log.append(noisyPayload(i, size: 1000 + i)) }
        try log.syncBlocking()
        try log.close()
        let segments = dir.segments()
        #expect(segments.count >= 3)
        let sealed = dir.file(segments[0])
        let original = readFile(sealed)
        let blocks = blockHeaders(original)
        #expect(blocks.count >= 3)
        let victim = blocks[1]
        #expect(victim.header.isEncrypted)
        var generator = SeededGenerator(seed: 11)
        let positions = [victim.offset, victim.offset + 5, victim.offset + 28, victim.offset + 39, victim.offset + 40, victim.offset + 44,
                         victim.offset + 60, victim.offset + victim.header.totalSize - 1] + (0..<8).map { _ in
            victim.offset + Int.random(in: 0..<victim.header.totalSize, using: &generator)
        }
        for position in positions {
            var damaged = original
            damaged[position] ^= 0x04
            writeFile(sealed, damaged)
            let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
            let items = try reopened.readAll()
            #expect(notices(items).map(\.kind) == [.corrupt], "flip at \(position)")
            #expect(notices(items).first?.range == victim.header.firstSeq..<victim.header.endSeq, "flip at \(position)")
            #expect(records(items).count == 400 - Int(victim.header.recordCount), "flip at \(position)")
            try reopened.close()
        }
        writeFile(sealed, original)
    }

    /// Rewrites the payload CRC (and header check) of the block at `offset`, in either header
    /// form, so only authentication can tell.
    func recomputeChecksums(_ bytes: inout [UInt8], blockAt offset: Int) {
        var header = blockHeaders(Array(bytes[0..<Format.segmentHeaderSize]) + Array(bytes[offset...])).first!.header
        header.payloadCRC = CRC32C.checksum(Array(bytes[offset + header.headerSize..<offset + header.totalSize]))
        header.store(into: &bytes, at: offset, segmentBase: 0)
    }

    @Test(arguments: ["nonce", "ciphertext", "tag"])
    func tamperedBlockWithValidChecksumsFailsAuthenticationAsCorruption(part: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, _) = try makeLog(dir, blocks: 3, perBlock: 4)
        let victim = blockHeaders(bytes)[1]
        let position = switch part {
        case "nonce": victim.offset + victim.header.headerSize + 4 + 3
        case "ciphertext": victim.offset + victim.header.headerSize + 16 + 2
        default: victim.offset + victim.header.totalSize - 2
        }
        var tampered = bytes
        tampered[position] ^= 0x80
        recomputeChecksums(&tampered, blockAt: victim.offset)
        writeFile(dir.file(Format.segmentName(0)), tampered)
        let log = try EventLog.open(directory: dir.path, configuration: Self.configuration())
        #expect(log.recoveryReport.tornTail == nil && log.nextSeq == 12, "checksums pass: recovery keeps the block")
        let items = try log.readAll()
        #expect(notices(items).map(\.range) == [4..<8])
        #expect(notices(items).first?.kind == .corrupt)
        #expect(notices(items).first?.detail.contains("authentication") == true)
        #expect(notices(items).first?.detail.contains("key 7") == true)
        #expect(records(items).map(\.seq) == [0, 1, 2, 3, 8, 9, 10, 11])
        #expect(try log.verify().corrupt.map(\.range) == [4..<8])
        try log.close()
    }

    @Test func blockMovedToAnotherLogWithTheSameKeyFailsAuthentication() throws {
        let a = TemporaryDirectory("a")
        let b = TemporaryDirectory("b")
        defer { a.cleanup(); b.cleanup() }
        let (bytesA, _) = try makeLog(a, blocks: 2, perBlock: 3)
        let (bytesB, _) = try makeLog(b, blocks: 2, perBlock: 3)
        let blockA = blockHeaders(bytesA)[1]
        let blockB = blockHeaders(bytesB)[1]
        // Same key, same seqs (the sizes may differ by a byte: timestamps differ), so only the
        // log id in the associated data tells the block does not belong here.
        #expect(blockA.header.firstSeq == blockB.header.firstSeq && blockA.header.recordCount == blockB.header.recordCount)
        var moved = bytesB
        moved.replaceSubrange(blockB.offset..<blockB.offset + blockB.header.totalSize,
                              with: bytesA[blockA.offset..<blockA.offset + blockA.header.totalSize])
        writeFile(b.file(Format.segmentName(0)), moved)
        let log = try EventLog.open(directory: b.path, configuration: Self.configuration())
        let items = try log.readAll()
        #expect(notices(items).map(\.range) == [3..<6])
        #expect(records(items).map(\.seq) == [0, 1, 2])
        try log.close()
    }
}
