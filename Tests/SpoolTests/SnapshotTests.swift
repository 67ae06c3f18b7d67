import Foundation
import Testing
@testable import Spool

/// `LogSnapshot` is what `spool verify`, `stat` and `dump` read: it must see exactly what a
/// writing open would after its repairs, and change no byte of the log (an empty LOCK aside).
@Suite struct SnapshotTests {
    /// Every file under `dir` (the LOCK file aside) with its bytes.
    func contents(_ dir: TemporaryDirectory) -> [String: [UInt8]] {
        var files = [String: [UInt8]]()
        let enumerator = FileManager.default.enumerator(atPath: dir.path)
        while let name = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            guard name != Format.lockFileName,
                  FileManager.default.fileExists(atPath: dir.file(name), isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            files[name] = readFile(dir.file(name))
        }
        return files
    }

    /// The report a writing open would give for what a snapshot found.
    func repaired(_ report: RecoveryReport) -> RecoveryReport {
        var report = report
        report.repaired = true
        return report
    }

    @Test func aSnapshotSeesWhatAWritingOpenWouldAtEveryTornOffsetAndChangesNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try writeAcknowledgedBlocks(dir, configuration: smallConfiguration(blockSize: 64 * 1024), blocks: 3, perBlock: 5)
        let segment = dir.file(Format.segmentName(0))
        // Every cut, from an empty file to the whole segment: a torn header, a torn block, none.
        for cut in 0...bytes.count {
            writeFile(segment, Array(bytes[0..<cut]))
            let before = contents(dir)
            let snapshot = try LogSnapshot(directory: dir.path)
            let seen = try snapshot.readAll()
            let summary = try snapshot.summary()
            let verified = try snapshot.verify()
            let report = snapshot.recoveryReport
            let endSeq = snapshot.endSeq
            snapshot.close()
            #expect(contents(dir) == before, "cut at \(cut): the snapshot changed the directory")
            #expect(!report.repaired)
            #expect(verified.isClean && verified.records == UInt64(records(seen).count), "cut at \(cut)")
            #expect(summary.records == UInt64(records(seen).count), "cut at \(cut)")

            let log = try EventLog.open(directory: dir.path)
            let survivors = ends.last { $0.offset <= cut }?.endSeq ?? 0
            #expect(seen == (try log.readAll()), "cut at \(cut)")
            #expect(records(seen).map(\.payload) == (0..<Int(survivors)).map { payload($0) }, "cut at \(cut)")
            #expect(endSeq == log.nextSeq, "cut at \(cut)")
            #expect(repaired(report) == log.recoveryReport, "cut at \(cut)")
            if cut > (ends.last { $0.offset <= cut }?.offset ?? Format.segmentHeaderSize) {
                #expect(report.tornTail != nil, "cut at \(cut): the torn tail is reported")
            }
            try log.close()
        }
    }

    @Test func aSnapshotReportsDamageAndHousekeepingAndLeavesThemToTheWriter() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let (bytes, ends) = try writeAcknowledgedBlocks(dir, configuration: smallConfiguration(blockSize: 64 * 1024), blocks: 3, perBlock: 5)
        try withEventLog(directory: dir.path) { log in
            try log.consumer(named: "reader").commit(through: 4)
            _ = try log.consumer(named: "broken")
        }
        // Damage inside the middle block, a temporary file an interrupted rename left, an
        // unreadable offset file.
        var damaged = bytes
        damaged[ends[0].offset + 30] ^= 0x40
        writeFile(dir.file(Format.segmentName(0)), damaged)
        writeFile(dir.file("META" + Format.temporarySuffix), [1, 2, 3])
        writeFile(dir.file(Format.consumersDirectory + "/broken" + Format.offsetSuffix), [0xFF])
        let before = contents(dir)

        let snapshot = try LogSnapshot(directory: dir.path)
        let seen = try snapshot.readAll()
        let report = snapshot.recoveryReport
        #expect(report.corruptions.count == 1)
        #expect(report.removedTemporaryFiles == ["META" + Format.temporarySuffix])
        #expect(report.resetConsumers == ["broken"])
        #expect(snapshot.consumerOffsets == ["reader": 5, "broken": 0])
        #expect(snapshot.lag(ofConsumer: "reader")?.records == 10)
        #expect(snapshot.lag(ofConsumer: "nobody") == nil)
        #expect(notices(seen).map(\.range) == [ends[0].endSeq..<ends[1].endSeq])
        #expect(try !snapshot.verify().isClean)
        snapshot.close()
        #expect(contents(dir) == before, "the snapshot repaired something")

        let log = try EventLog.open(directory: dir.path)
        defer { try? log.close() }
        #expect(repaired(report) == log.recoveryReport)
        #expect(seen == (try log.readAll()))
        #expect(!FileManager.default.fileExists(atPath: dir.file("META" + Format.temporarySuffix)))
    }

    /// A consumer's offset past the last stored record (a power loss took back records it had
    /// passed): a writing open skips seqs ahead and readers see the gap as missing; a snapshot
    /// reads the same, though it starts no segment at the new seq.
    @Test func aSnapshotReportsSeqsAPowerLossTookBackAsMissingAsAWritingOpenDoes() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try writeLogWithOffsetPastItsRecords(dir)
        let before = contents(dir)

        let snapshot = try LogSnapshot(directory: dir.path)
        let seen = try snapshot.readAll()
        let fromGap = try snapshot.readAll(from: 12)
        let verified = try snapshot.verify()
        #expect((snapshot.endSeq, snapshot.nextSeq) == (10, 15))
        snapshot.close()
        #expect(contents(dir) == before, "the snapshot changed the directory")
        #expect(records(seen).map(\.seq) == Array(0..<10))
        #expect(notices(seen).map(\.kind) == [.missing])
        #expect(notices(seen).map(\.range) == [10..<15])
        #expect(notices(fromGap).map(\.range) == [12..<15] && records(fromGap).isEmpty)
        #expect(verified.isClean && verified.records == 10)
        #expect(verified.otherNotices.map(\.range) == [10..<15])

        let reopened = try EventLog.open(directory: dir.path)
        defer { try? reopened.close() }
        let written = try reopened.readAll()
        #expect(records(written) == records(seen))
        #expect(notices(written).map(\.kind) == notices(seen).map(\.kind))
        #expect(notices(written).map(\.range) == notices(seen).map(\.range))
    }

    @Test func aSnapshotAndAWriterExcludeEachOtherButSnapshotsShare() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(0), durability: .written)
        #expect { _ = try LogSnapshot(directory: dir.path) } throws: { ($0 as? SpoolError)?.code == .locked }
        try log.close()

        let first = try LogSnapshot(directory: dir.path)
        let second = try LogSnapshot(directory: dir.path)
        #expect(records(try second.readAll()).map(\.payload) == [payload(0)])
        #expect { _ = try EventLog.open(directory: dir.path) } throws: { ($0 as? SpoolError)?.code == .locked }
        first.close()
        #expect { _ = try EventLog.open(directory: dir.path) } throws: { ($0 as? SpoolError)?.code == .locked }
        second.close()
        second.close()  // twice is harmless
        try EventLog.open(directory: dir.path).close()
    }

    /// With no LOCK file and none creatable, a snapshot reads unlocked only on a read-only file
    /// system (no writer can start there); denied permission (another user's log, whose writer
    /// could start mid-read) fails, naming LOCK. Root ignores permissions: faults stand in.
    @Test func aSnapshotReadsUnlockedOnlyWhereNoWriterCanStart() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(0), durability: .synced)
        try log.close()
        try FileManager.default.removeItem(atPath: dir.file(Format.lockFileName))

        // The first open finds no LOCK; the second, creating it, fails.
        FaultInjection.arm(.open, under: dir.file(Format.lockFileName), after: 1, fault: .error(.readOnlyFileSystem))
        let snapshot = try LogSnapshot(directory: dir.path)
        #expect(records(try snapshot.readAll()).map(\.payload) == [payload(0)])
        snapshot.close()
        FaultInjection.disarm(under: dir.file(Format.lockFileName))

        FaultInjection.arm(.open, under: dir.file(Format.lockFileName), after: 1, fault: .error(.permissionDenied))
        #expect { _ = try LogSnapshot(directory: dir.path) } throws: {
            let error = $0 as? SpoolError
            return error?.errno == .permissionDenied && error?.path == dir.file(Format.lockFileName)
        }
        #expect(!FileManager.default.fileExists(atPath: dir.file(Format.lockFileName)))
    }

    @Test func aSnapshotOfNoLogIsRefusedAndCreatesNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        #expect { _ = try LogSnapshot(directory: dir.file("missing")) } throws: { ($0 as? SpoolError)?.code == .invalidArgument }
        #expect(!FileManager.default.fileExists(atPath: dir.file("missing")))
        #expect { _ = try LogSnapshot(directory: dir.path) } throws: { ($0 as? SpoolError)?.code == .invalidArgument }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty)
    }

    @Test func aSnapshotOfADamagedMetaWithNoSegmentIsCorruptNotNoLog() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        try EventLog.open(directory: dir.path).close()
        for segment in dir.segments() { try FileManager.default.removeItem(atPath: dir.file(segment)) }
        writeFile(dir.file(Format.metaFileName), [UInt8](repeating: 0xAB, count: Format.metaSize))
        #expect { _ = try LogSnapshot(directory: dir.path) } throws: {
            let error = $0 as? SpoolError
            return error?.code == .corrupt && error?.path == dir.file(Format.metaFileName)
                && error?.message.contains("META is damaged and there is no segment") == true
        }
    }
}
