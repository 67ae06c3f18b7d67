import Foundation
import Testing
@testable import Spool

/// Files an adversary leaves in a log directory: a stale block copy after damaged bytes, an
/// offset file dropped in `consumers/`, segment headers with values no writer makes. None may
/// hide lost records, change a file when the open then fails, or be misreported.
@Suite struct HostileFileTests {
    /// 100 records `r0`…`r99` in one segment, closed.
    func makeLog(_ dir: TemporaryDirectory, count: Int = 100) throws {
        try withEventLog(directory: dir.path) { log in
            for i in 0..<count { try log.append(Array("r\(i)".utf8)) }
        }
    }

    // MARK: Item 5: damaged bytes followed by a stale copy of an earlier block

    /// Blocks 0..<4, 4..<8 (damaged), a byte copy of the first block, then 8..<12: records
    /// 4..<8 were lost to damage and read as *corrupt* (FORMAT.md §6: the search passes over the
    /// stale copy), so `verify` fails. Before the fix readers restarted at the stale copy and
    /// called 4..<8 *missing*, and `verify` said ok.
    @Test func aStaleCopyAfterDamagedBytesLeavesTheLostRecordsCorruptAndVerifyFails() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try writeAcknowledgedBlocks(dir, configuration: smallConfiguration(blockSize: 64 * 1024), blocks: 3, perBlock: 4)
        let firstBlock = Array(bytes[Format.segmentHeaderSize..<ends[0].offset])
        var secondBlock = Array(bytes[ends[0].offset..<ends[1].offset])
        secondBlock[0] ^= 0xFF  // its magic
        let damaged = Array(bytes[..<ends[0].offset]) + secondBlock + firstBlock + Array(bytes[ends[1].offset...])
        writeFile(dir.file(Format.segmentName(0)), damaged)
        let lost = ends[0].endSeq..<ends[1].endSeq
        let snapshot = try LogSnapshot(directory: dir.path)
        let report = try snapshot.verify()
        #expect(!report.isClean)
        #expect(report.corrupt.map(\.range) == [lost])
        #expect(report.otherNotices.isEmpty)
        snapshot.close()
        let log = try EventLog.open(directory: dir.path)
        #expect(log.nextSeq == ends[2].endSeq)
        let items = try log.readAll()
        #expect(notices(items).map(\.kind) == [.corrupt])
        #expect(notices(items).map(\.range) == [lost])
        #expect(records(items).map(\.seq) == Array(0..<lost.lowerBound) + Array(lost.upperBound..<ends[2].endSeq))
        // A reader starting inside the lost range, and one starting inside the last block.
        #expect(notices(try log.readAll(from: lost.lowerBound + 1)).map(\.range) == [lost.lowerBound + 1..<lost.upperBound])
        #expect(records(try log.readAll(from: ends[1].endSeq + 1)).map(\.seq) == Array(ends[1].endSeq + 1..<ends[2].endSeq))
        try log.close()
    }

    // MARK: Item 12: an open that fails changes nothing

    /// A garbage `*.offset` dropped in `consumers/`, temporary leftovers and a torn tail, then an
    /// open that fails (a wrong key): every file is left as it was. Before the fix the open
    /// reset the offset file, removed the leftovers and cut the tail first.
    @Test func anOpenThatFailsLeavesADroppedOffsetFileAsItWas() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.encryption = .init(keys: [7: [UInt8](repeating: 1, count: 32)], current: 7)
        try withEventLog(directory: dir.path, configuration: configuration) { log in
            for i in 0..<5 { try log.append(payload(i)) }
            _ = try log.consumer(named: "reader")
        }
        let dropped = dir.file("consumers/intruder.offset")
        writeFile(dropped, Array("garbage".utf8))
        let torn = dir.file("consumers/reader.offset.tmp")
        writeFile(torn, [1, 2, 3])
        let leftover = dir.file(Format.metaFileName + Format.temporarySuffix)
        writeFile(leftover, [4])
        let segment = dir.file(Format.segmentName(0))
        let tornSegment = readFile(segment) + Array("SPB".utf8)  // a torn last block
        writeFile(segment, tornSegment)
        var wrong = configuration
        wrong.encryption = .init(keys: [7: [UInt8](repeating: 2, count: 32)], current: 7)
        #expect { try EventLog.open(directory: dir.path, configuration: wrong) } throws: { ($0 as? SpoolError)?.code == .authenticationFailed }
        #expect(readFile(dropped) == Array("garbage".utf8))
        #expect(readFile(torn) == [1, 2, 3])
        #expect(readFile(leftover) == [4])
        #expect(readFile(segment) == tornSegment, "the torn tail is not cut by an open that fails")
        // The right key: the open repairs them all.
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(log.recoveryReport.resetConsumers == ["intruder"])
        #expect(log.recoveryReport.tornTail?.bytes == 3)
        try log.close()
        #expect(readFile(dropped).count == Format.offsetFileSize)
        #expect(!FileManager.default.fileExists(atPath: torn))
        #expect(!FileManager.default.fileExists(atPath: leftover))
        #expect(readFile(segment).count == tornSegment.count - 3)
    }

    // MARK: Item 6: versions no writer makes

    /// A segment header with version 0, or header size 65, and a valid CRC: refused with
    /// `unsupportedVersion` and a message that says what is wrong (before the fix: "version 0
    /// is newer than this reader's").
    @Test(arguments: [(8, UInt8(0), "version 0 is not a version"), (10, UInt8(65), "header size 65")])
    func aSegmentVersionOrHeaderSizeNoWriterMakesIsReportedPrecisely(offset: Int, value: UInt8, message: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try makeLog(dir, count: 3)
        var bytes = readFile(dir.file(Format.segmentName(0)))
        bytes[offset] = value
        bytes.storeLE(CRC32C.checksum(Array(bytes[0..<60])), at: 60)
        writeFile(dir.file(Format.segmentName(0)), bytes)
        #expect { try EventLog.open(directory: dir.path) } throws: { error in
            (error as? SpoolError)?.code == .unsupportedVersion && "\(error)".contains(message) && !"\(error)".contains("newer")
        }
    }
}
