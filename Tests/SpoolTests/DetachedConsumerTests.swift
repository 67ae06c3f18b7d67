import Foundation
import Testing
@testable import Spool

/// `DetachedConsumer` (issue #19, consumers in another process): it reads and commits beside
/// an open writer, one committer per consumer, and the writer's retention honours its offset
/// and never rewrites it. The writer here is an `EventLog` in this process, holding the log's
/// lock as another process's would; the consumer never touches that lock.
@Suite struct DetachedConsumerTests {
    func noise(_ i: Int) -> String {
        var random = SplitMix64(seed: UInt64(i))
        return (0..<6).map { _ in String(random.next(), radix: 16) }.joined()
    }

    func segmentBases(_ dir: TemporaryDirectory) throws -> [UInt64] {
        try FileManager.default.contentsOfDirectory(atPath: dir.path).compactMap(Format.baseSeq(ofSegmentNamed:)).sorted()
    }

    @Test func itReadsAndCommitsBesideAnOpenWriterAndRetentionKeepsWhatItHasNotCommitted() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 1024, segmentSize: 64 * 1024))
        defer { try? log.close() }
        for i in 0..<500 { _ = try log.append("a \(i) " + noise(i)) }
        try log.syncBlocking()
        let sidecar = try DetachedConsumer(directory: dir.path, name: "sidecar", creating: true)
        defer { sidecar.close() }
        #expect(sidecar.committed == 0)

        // Many segments roll while the sidecar has committed nothing: retention (run by the
        // writer after each roll, reading the sidecar's offset file) deletes none of them.
        for i in 500..<6_000 { _ = try log.append("a \(i) " + noise(i)) }
        try log.syncBlocking()
        #expect(try segmentBases(dir).first == 0, "retention deleted records the sidecar had not committed")
        #expect(try segmentBases(dir).count > 3)

        var seen = [UInt64]()
        while seen.count < 3_000 {
            let batch = try sidecar.read(maxCount: 500)
            #expect(batch.notices.isEmpty)
            seen += batch.records.map(\.seq)
            try sidecar.commit(batch)
        }
        #expect(seen == Array(0..<3_000))
        // The next roll lets the writer delete what every consumer (the sidecar) has passed,
        // and nothing past it.
        for i in 6_000..<9_000 { _ = try log.append("a \(i) " + noise(i)) }
        try log.syncBlocking()
        // Retention runs on its queue after the roll; the bound only keeps a broken build
        // from hanging.
        for _ in 0..<500 where try segmentBases(dir).first == 0 { usleep(10_000) }
        let bases = try segmentBases(dir)
        #expect(bases.first! > 0, "retention ran after the sidecar's commit and a roll")
        #expect(bases.first! <= 3_000, "a segment holding records past the sidecar's offset was deleted: \(bases)")
        #expect(log.firstSeq <= 3_000)
        // The writer never writes the sidecar's offset: it is what the sidecar committed.
        let offset = try #require(try OffsetFile.read(Consumers.path(of: "sidecar", logDirectory: dir.path)))
        #expect(offset.nextSeq == 3_000)
    }

    /// A writer that opens while a committer in another process holds a consumer leaves that
    /// consumer's files alone: its offset file's temporary file (a creation in progress, about
    /// to be renamed) and its offset file even when unreadable (the committer keeps writing
    /// slots into the file it has open; a reset would rename a new one over it). Once the
    /// committer is gone, an open repairs both as leftovers.
    @Test func aWriterOpeningBesideALiveCommitterLeavesItsFilesAlone() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let first = try EventLog.open(directory: dir.path)
        _ = try first.appendBlocking(Array("r".utf8), durability: .synced)
        try first.close()
        let sidecar = try DetachedConsumer(directory: dir.path, name: "sidecar", creating: true)
        let offsetFile = Consumers.path(of: "sidecar", logDirectory: dir.path)
        let temporary = offsetFile + Format.temporarySuffix
        let temporaryBytes = Data(repeating: 7, count: 40)
        let damaged = Data(repeating: 0xAB, count: 1024)
        #expect(FileManager.default.createFile(atPath: temporary, contents: temporaryBytes))
        #expect(FileManager.default.createFile(atPath: offsetFile, contents: damaged))
        let writer = try EventLog.open(directory: dir.path)
        #expect(FileManager.default.contents(atPath: temporary) == temporaryBytes, "the live committer's temporary file was removed or changed")
        #expect(FileManager.default.contents(atPath: offsetFile) == damaged, "the live committer's offset file was reset")
        #expect(writer.recoveryReport.removedTemporaryFiles.isEmpty)
        #expect(writer.recoveryReport.resetConsumers.isEmpty)
        try writer.close()
        sidecar.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(!FileManager.default.fileExists(atPath: temporary), "a leftover with no live committer is removed")
        #expect(reopened.recoveryReport.removedTemporaryFiles == ["consumers/sidecar.offset.tmp"])
        #expect(reopened.recoveryReport.resetConsumers == ["sidecar"])
        #expect(try OffsetFile.read(offsetFile)?.nextSeq == 0)
        try reopened.close()
    }

    @Test func oneCommitterPerConsumerInAnyProcessOrRole() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        _ = try log.append("x")
        try log.syncBlocking()
        let first = try DetachedConsumer(directory: dir.path, name: "c", creating: true)
        #expect { try DetachedConsumer(directory: dir.path, name: "c") } throws: { ($0 as? SpoolError)?.code == .locked && "\($0)".contains("consumer c") }
        #expect { try log.consumer(named: "c") } throws: { ($0 as? SpoolError)?.code == .locked }
        #expect { try DetachedConsumer(directory: dir.path, name: "missing") } throws: { ($0 as? SpoolError)?.code == .invalidArgument }
        try first.commit(upTo: 1)
        first.close()
        #expect { try first.read() } throws: { ($0 as? SpoolError)?.code == .closed }
        // Released: the writer's own consumer takes it, at the sidecar's offset.
        let own = try log.consumer(named: "c")
        #expect(own.committed == 1)
        #expect { try DetachedConsumer(directory: dir.path, name: "c") } throws: { ($0 as? SpoolError)?.code == .locked }
        try log.close()
        // The writer closed: its hold on the consumer went with it.
        let again = try DetachedConsumer(directory: dir.path, name: "c")
        #expect(again.committed == 1)
        again.close()
    }

    @Test func aCommitPastWhatIsWrittenIsRefusedAndTheOffsetSurvivesAWriterRestart() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { _ = try log.append("r\(i)") }
        try log.syncBlocking()
        let sidecar = try DetachedConsumer(directory: dir.path, name: "s", creating: true)
        defer { sidecar.close() }
        #expect { try sidecar.commit(upTo: 11) } throws: { ($0 as? SpoolError)?.code == .invalidCommit }
        // Written by the writer but never read by the sidecar: the commit syncs it first.
        try sidecar.commit(upTo: 5)
        #expect { try sidecar.commit(upTo: 3) } throws: { ($0 as? SpoolError)?.code == .invalidCommit }
        try log.close()
        log = try EventLog.open(directory: dir.path)
        defer { try? log.close() }
        #expect(try OffsetFile.read(Consumers.path(of: "s", logDirectory: dir.path))?.nextSeq == 5)
        _ = try log.append("r10")
        try log.syncBlocking()
        // The sidecar reads on from its offset, across the writer's restart.
        let batch = try sidecar.read(maxCount: 100)
        #expect(batch.records.map { String(decoding: $0.payload, as: UTF8.self) } == (5...10).map { "r\($0)" })
    }

    /// Expired records are skipped as one merged notice, and one read examines a bounded number
    /// of them (the rule every consumer reads by), not one notice per record across the log.
    @Test func expiredRecordsAreOneNoticeAndAReadIsBounded() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        defer { try? log.close() }
        for i in 0..<120_000 { _ = try log.append("old \(i)") }
        try log.syncBlocking()
        usleep(20_000)
        var configuration = Configuration()
        configuration.maxAge = .milliseconds(5)
        let sidecar = try DetachedConsumer(directory: dir.path, name: "late", creating: true, configuration: configuration)
        defer { sidecar.close() }
        let first = try sidecar.read(maxCount: 10)
        #expect(first.records.isEmpty)
        #expect(first.notices.count == 1 && first.notices.first?.kind == .expired)
        #expect(first.endSeq == 100_000, "a read examines at most 100,000 items")
        try sidecar.commit(first)
        let second = try sidecar.read(maxCount: 10)
        #expect(second.notices.map(\.range) == [100_000..<120_000])
    }

    /// Issue #27: both consumers are a `LogConsumer` with one offset convention (exclusive
    /// ends): an empty batch commits as a no-op, even at offset 0, and a batch's `endSeq` is
    /// what it commits to, in the writing process and beside it alike.
    @Test func bothConsumersCommitBatchesByTheirExclusiveEndAndAnEmptyBatchIsANoOp() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        defer { try? log.close() }
        let sidecar = try DetachedConsumer(directory: dir.path, name: "sidecar", creating: true)
        defer { sidecar.close() }
        let consumers: [any LogConsumer] = [try log.consumer(named: "own"), sidecar]
        for consumer in consumers {
            let empty = try consumer.read(maxCount: 10, maxBytes: 1024)
            #expect(empty.isEmpty && empty.endSeq == 0)
            try consumer.commit(empty)
            #expect(consumer.committed == 0)
        }
        for i in 0..<5 { _ = try log.append("r\(i)") }
        try log.syncBlocking()
        for consumer in consumers {
            let batch = try consumer.read(maxCount: 3, maxBytes: 1024)
            #expect(batch.records.map(\.seq) == [0, 1, 2] && batch.endSeq == 3)
            try consumer.commit(batch)
            #expect(consumer.committed == 3)
            try consumer.commit(upTo: 5)
            #expect(consumer.committed == 5)
            let atEnd = try consumer.read(maxCount: 3, maxBytes: 1024)
            #expect(atEnd.isEmpty && atEnd.endSeq == 5)
            try consumer.commit(atEnd)
            #expect(consumer.committed == 5)
            #expect { try consumer.commit(upTo: 6) } throws: { ($0 as? SpoolError)?.code == .invalidCommit }
            #expect { try consumer.commit(upTo: 4) } throws: { ($0 as? SpoolError)?.code == .invalidCommit }
        }
    }
}
