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
            try log.consumer(named: "reader").commit(upTo: 5)
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

    /// Readers never block the writer and the writer never blocks readers (issue #19): a
    /// snapshot opens beside an open `EventLog`, an `EventLog` opens beside snapshots, and the
    /// snapshot reads what was written when it was taken.
    @Test func aSnapshotAndAWriterOpenBesideEachOther() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(0), durability: .written)
        let live = try LogSnapshot(directory: dir.path)
        #expect(live.isLive)
        #expect(records(try live.readAll()).map(\.payload) == [payload(0)])
        try log.appendBlocking(payload(1), durability: .written)
        #expect(records(try live.readAll()).count == 1)  // what was written when it was taken
        #expect(records(try LogSnapshot(directory: dir.path).readAll()).count == 2)
        try log.close()

        let first = try LogSnapshot(directory: dir.path)
        #expect(!first.isLive)
        let writer = try EventLog.open(directory: dir.path)  // beside a snapshot
        try writer.appendBlocking(payload(2), durability: .written)
        #expect(records(try first.readAll()).count == 2)
        #expect { _ = try EventLog.open(directory: dir.path) } throws: { ($0 as? SpoolError)?.code == .locked }
        try writer.close()
        first.close()
        first.close()  // twice is harmless
    }

    /// Beside a writer, the bytes after the last complete block are the writer's (a block it is
    /// writing): not a torn tail, and `verify` is clean. Without a writer the same bytes are a
    /// torn tail, reported as such. Damage before the tail is found either way.
    @Test func aLiveTailIsNotYetWrittenNotDamage() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.appendBlocking(payload(i), durability: .written) }
        // Half a block, as a reader can see one the writer is writing.
        let active = dir.file(dir.segments().last!)
        let halfBlock = Data([0x53, 0x50, 0x42, 0x4B, 0x01, 0x00, 0x00, 0x00, 0x0A])
        func appendHalfBlock() throws {
            let handle = try #require(FileHandle(forWritingAtPath: active))
            handle.seekToEndOfFile()
            handle.write(halfBlock)
            try handle.close()
        }
        try appendHalfBlock()

        let live = try LogSnapshot(directory: dir.path)
        #expect(live.recoveryReport.tornTail == nil)
        #expect(try live.verify().isClean)
        #expect(records(try live.readAll()).count == 10)
        #expect(notices(try live.readAll()).isEmpty)
        try log.close()
        try appendHalfBlock()  // now with no writer: what a crash mid-write leaves

        let after = try LogSnapshot(directory: dir.path)
        #expect(!after.isLive)
        #expect(after.recoveryReport.tornTail != nil)  // no writer: the same bytes are a torn tail
        #expect(records(try after.readAll()).count == 10)
    }

    /// A segment that retention deletes while a snapshot of the live log reads ends with a
    /// *dropped* notice for its records: no crash, no error.
    @Test func aSegmentDeletedUnderALiveSnapshotReadsAsDropped() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.segmentSize = 64 * 1024
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let consumer = try log.consumer(named: "c")
        var random = SplitMix64(seed: 19)  // incompressible, so 400 records fill several segments
        func noise() -> [UInt8] { (0..<600).map { _ in UInt8(truncatingIfNeeded: random.next()) } }
        for _ in 0..<400 { try log.appendBlocking(noise(), durability: .written) }
        try log.syncBlocking()
        let live = try LogSnapshot(directory: dir.path)
        let before = dir.segments()
        #expect(before.count > 2)
        // Retention deletes every sealed segment the consumer has passed.
        try consumer.commit(upTo: log.nextSeq)
        try log.appendBlocking(noise(), durability: .synced)
        #expect(dir.segments().count < before.count)
        let items = try live.readAll()
        let dropped = notices(items).filter { $0.kind == .dropped }
        #expect(!dropped.isEmpty)
        #expect(records(items).count + dropped.reduce(0) { $0 + Int($1.range.count) } == 400)
        try log.close()
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
