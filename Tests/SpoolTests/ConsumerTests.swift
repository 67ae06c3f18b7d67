import Foundation
import Testing
@testable import Spool

@Suite struct ConsumerTests {
    @Test func readReturnsTheSameBatchUntilCommitted() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<120 { try log.append(payload(i)) }
        try log.syncBlocking()
        let consumer = try log.consumer(named: "uploader")
        #expect(consumer.committed == 0)
        let first = try consumer.read(maxCount: 50)
        #expect(first.records.map(\.seq) == Array(0..<50))
        #expect(try consumer.read(maxCount: 50) == first)
        try consumer.commit(upTo: 50)
        #expect(consumer.committed == 50)
        let second = try consumer.read(maxCount: 50)
        #expect(second.records.map(\.seq) == Array(50..<100))
        #expect(second.records.map(\.payload) == (50..<100).map { payload($0) })
        #expect(consumer.lag.records == 70)
        #expect(consumer.eventID(of: 7) == "\(log.id)-7")
        try log.close()
    }

    @Test func maxBytesLimitsABatchButTheFirstRecordAlwaysComes() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        try log.append([UInt8](repeating: 65, count: 5000))
        for i in 1..<10 { try log.append(payload(i, size: 10)) }
        try log.syncBlocking()
        let consumer = try log.consumer(named: "c")
        #expect(try consumer.read(maxCount: 10, maxBytes: 100).records.map(\.seq) == [0])
        try consumer.commit(upTo: 1)
        let batch = try consumer.read(maxCount: 10, maxBytes: 150)
        #expect(batch.records.count >= 1 && batch.records.count < 9)
        #expect(batch.records.reduce(0) { $0 + $1.payload.count } <= 150)
        try log.close()
    }

    @Test func commitRulesAreEnforced() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.append(payload(i)) }
        let consumer = try log.consumer(named: "c")
        try consumer.commit(upTo: 5)
        try consumer.commit(upTo: 5)  // the same offset again: a no-op
        #expect { try consumer.commit(upTo: 3) } throws: { ($0 as! SpoolError).code == .invalidCommit }
        #expect { try consumer.commit(upTo: 11) } throws: { ($0 as! SpoolError).code == .invalidCommit }
        #expect { _ = try log.consumer(named: "bad/name") } throws: { ($0 as! SpoolError).code == .invalidConsumerName }
        #expect { _ = try log.consumer(named: "") } throws: { ($0 as! SpoolError).code == .invalidConsumerName }
        #expect { _ = try log.consumer(named: ".hidden") } throws: { ($0 as! SpoolError).code == .invalidConsumerName }
        #expect(consumer.committed == 5)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.consumer(named: "c").committed == 5)
        try reopened.close()
    }

    @Test func offsetFileSurvivesATornSlotWrite() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.append(payload(i)) }
        let consumer = try log.consumer(named: "c")
        try consumer.commit(upTo: 4)  // generation 2 → slot 1
        try consumer.commit(upTo: 7)  // generation 3 → slot 0
        try log.close()
        let path = dir.file("consumers/c.offset")
        let original = readFile(path)
        // Tear the newest slot (slot 0) at every byte: the previous commit (through 3) wins.
        for cut in 0..<Format.offsetSlotSize {
            var torn = original
            for i in cut..<Format.offsetSlotSize { torn[i] = 0xFF }
            writeFile(path, torn)
            let reopened = try EventLog.open(directory: dir.path)
            let committed = try reopened.consumer(named: "c").committed
            #expect(committed == 7 || committed == 4, "cut at \(cut)")
            if cut < 28 { #expect(committed == 4, "cut at \(cut)") }
            try reopened.close()
        }
    }

    @Test(arguments: ["empty", "garbage", "truncated"])
    func unreadableOffsetFileRestartsAtTheOldestRecordNeverAhead(kind: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.append(payload(i)) }
        try log.consumer(named: "c").commit(upTo: 7)
        try log.close()
        let path = dir.file("consumers/c.offset")
        switch kind {
        case "empty": writeFile(path, [])
        case "garbage": writeFile(path, [UInt8](repeating: 0xAB, count: 1024))
        default: writeFile(path, Array(readFile(path).prefix(10)))
        }
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.recoveryReport.resetConsumers == ["c"])
        let consumer = try reopened.consumer(named: "c")
        #expect(consumer.committed == 0)
        #expect(try consumer.read(maxCount: 100).records.count == 10)
        try reopened.close()
    }

    /// A consumer is handed only durable records, and pays for a sync only when it needs one:
    /// a batch the durable records fill costs none; one that reaches written records has them
    /// synced, and goes on.
    @Test func aConsumerSyncsWrittenRecordsOnlyWhenItReachesThem() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        let consumer = try log.consumer(named: "c")
        for i in 0..<100 { try log.append(payload(i)) }
        try await log.sync()
        for i in 100..<110 { try await log.append(payload(i), durability: .written) }
        #expect(log.syncedEnd == 100)
        let fsyncs = log.stats().fsyncs
        let first = try await consumer.read(maxCount: 50)
        #expect(first.records.map(\.seq) == Array(0..<50))
        #expect(log.stats().fsyncs == fsyncs, "the durable records filled the batch")
        try await consumer.commit(upTo: 50, mode: .fast)
        let second = try await consumer.read(maxCount: 100)
        #expect(second.records.map(\.seq) == Array(50..<110))
        #expect(log.stats().fsyncs == fsyncs + 1)
        #expect(log.syncedEnd == 110)
        try log.close()
    }

    /// An offset file reset at open gets the configured file mode, like every other file.
    @Test func aResetOffsetFileHasTheConfiguredMode() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.fileMode = 0o640
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        try log.append(payload(0))
        try log.consumer(named: "c").commit(upTo: 1)
        try log.close()
        let path = dir.file("consumers/c.offset")
        writeFile(path, [UInt8](repeating: 0xAB, count: 1024))
        chmod(path, 0o600)
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.recoveryReport.resetConsumers == ["c"])
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o640)
        try reopened.close()
    }

    /// After close the directory lock is released and another process may own the files: a
    /// consumer kept past close refuses to read or to write its offset file.
    @Test func aConsumerOfAClosedLogRefusesToReadAndCommit() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<5 { try log.append(payload(i)) }
        let consumer = try log.consumer(named: "c")
        try log.close()
        #expect { try consumer.commit(upTo: 3) } throws: { ($0 as? SpoolError)?.code == .closed }
        #expect { try consumer.read() } throws: { ($0 as? SpoolError)?.code == .closed }
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.consumer(named: "c").committed == 0)
        try reopened.close()
    }

    /// Deleting passed segments fails after the unlinks (the directory fsync): the commit
    /// stands and does not throw, the unlinked segments are forgotten at once (a reader does
    /// not look for them), and the next durable commit runs retention again.
    @Test func aRetentionFailureLeavesTheCommitInPlace() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let consumer = try log.consumer(named: "c")
        let before = try appendAcrossSegments(log, in: dir, count: 600)
        #expect(before.count >= 4)
        let thirdBase = Format.baseSeq(ofSegmentNamed: before[2])!
        // The retention run queued by the last roll has finished: run late (a loaded machine),
        // it took the commit's segments itself and was still unlinking them when the test
        // listed the directory.
        log.retentionQueue.sync {}
        // The commit's own fdatasync (of the offset file) passes; retention's directory fsync fails.
        FaultInjection.arm(.sync, under: dir.path, after: 1, times: 1, fault: .error(.ioError))
        try consumer.commit(upTo: thirdBase + 1)
        FaultInjection.disarm(under: dir.path)
        #expect(consumer.committed == thirdBase + 1)
        #expect(dir.segments() == Array(before[2...]))
        #expect(log.firstSeq == thirdBase, "the unlinked segments are forgotten")
        let batch = try consumer.read(maxCount: 1000)
        #expect(batch.notices.isEmpty)
        #expect(batch.records.first?.seq == thirdBase + 1)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(try reopened.consumer(named: "c").committed == thirdBase + 1)
        try reopened.close()
    }

    @Test func retentionDeletesSegmentsEveryConsumerHasPassed() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let a = try log.consumer(named: "a")
        let b = try log.consumer(named: "b")
        let before = try appendAcrossSegments(log, in: dir, count: 600)
        #expect(before.count >= 4)
        try a.commit(upTo: 600)
        #expect(dir.segments() == before, "b still needs everything")
        let secondBase = Format.baseSeq(ofSegmentNamed: before[2])!
        try b.commit(upTo: secondBase + 1)
        #expect(dir.segments() == Array(before[2...]))
        #expect(log.firstSeq == secondBase)
        let batch = try b.read(maxCount: 1000)
        #expect(batch.notices.isEmpty)
        #expect(batch.records.first?.seq == secondBase + 1)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.firstSeq == secondBase)
        #expect(reopened.nextSeq == 600)
        try reopened.close()
    }

    @Test func logWithoutConsumersKeepsEverything() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        _ = try appendAcrossSegments(log, in: dir, count: 600)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.firstSeq == 0)
        #expect(records(try reopened.readAll()).count == 600)
        try reopened.close()
    }

    @Test func dropOldestCapStaysUnderTheCapAndCountsExactlyWhatWasLost() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = rollingConfiguration()
        configuration.maxBytes = 256 * 1024
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let consumer = try log.consumer(named: "slow")
        for i in 0..<3000 {
            try log.append(noisyPayload(i, size: 900))
            if i % 100 == 99 { try log.syncBlocking() }
            #expect(log.stats().diskBytes <= Int64(256 * 1024 + 8192), "at \(i)")
        }
        try log.syncBlocking()
        let stats = log.stats()
        #expect(stats.droppedRecords > 0)
        #expect(stats.droppedRecords == log.firstSeq, "every record below the oldest stored one was counted")
        var delivered: UInt64 = 0
        var dropped: UInt64 = 0
        while true {
            let batch = try consumer.read(maxCount: 500)
            if batch.isEmpty { break }
            delivered += UInt64(batch.records.count)
            dropped += batch.notices.filter { $0.kind == .dropped }.reduce(0) { $0 + $1.count }
            try consumer.commit(batch)
        }
        #expect(dropped == stats.droppedRecords)
        #expect(delivered + dropped == 3000)
        try log.close()
    }

    /// A consumer whose offset file could not be made does not exist: it must not hold back
    /// the retention of the consumers that do (it is registered before its file is made, so
    /// that retention meanwhile keeps what it starts at, and unregistered on failure).
    @Test func aConsumerThatCouldNotBeCreatedHoldsNothingBack() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: rollingConfiguration())
        let reader = try log.consumer(named: "a")
        let segments = try appendAcrossSegments(log, in: dir, count: 300)
        #expect(segments.count >= 3)
        FaultInjection.arm(.rename, under: dir.path + "/consumers", fault: .error(.ioError))
        #expect(throws: SpoolError.self) { _ = try log.consumer(named: "x") }
        FaultInjection.disarm(under: dir.path + "/consumers")
        #expect(!log.consumerNames.contains("x"))
        try reader.commit(upTo: log.nextSeq)
        #expect(dir.segments().count == 1, "every sealed segment was passed by the only consumer")
        try log.close()
    }

    /// The cap charges a write what it stores, compressed: a batch whose records are large
    /// but compress well drops nothing while the log stays under the cap after the write.
    @Test func dropOldestChargesAWriteItsCompressedSizeNotItsRecordsSize() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = smallConfiguration(blockSize: 4096, segmentSize: 64 * 1024)
        configuration.maxBytes = 128 * 1024
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        _ = try log.consumer(named: "c")
        for i in 0..<160 { try log.append(noisyPayload(i, size: 900)) }
        try log.syncBlocking()
        let before = log.stats().diskBytes
        #expect(log.stats().droppedRecords == 0)
        #expect(dir.segments().count >= 2, "a sealed segment the cap could drop")
        // 100 KB of one byte: a few hundred bytes stored, so the log stays far under the cap.
        try log.appendBlocking([UInt8](repeating: 0x41, count: 100_000), durability: .synced)
        #expect(log.stats().droppedRecords == 0)
        #expect(log.stats().diskBytes < before + 4096)
        #expect(log.stats().diskBytes <= 128 * 1024)
        #expect(records(try log.readAll()).count == 161)
        try log.close()
    }

    /// One write batch that rolls several segments (a slow disk let the appends pile up behind
    /// the writer) stays under the cap: the segments it seals are dropped before its later
    /// writes, not left above the cap until the next batch.
    @Test func aBatchThatRollsSeveralSegmentsStaysUnderTheCap() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let cap = 128 * 1024
        var configuration = rollingConfiguration()
        configuration.maxBytes = cap
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        _ = try log.consumer(named: "slow")
        // The writer's next write stalls; the records appended meanwhile (~470 KB stored,
        // seven segments' worth) are all written by the batch after it.
        FaultInjection.arm(.write, under: dir.path + "/0", times: 1, fault: .delay(.milliseconds(500)))
        for i in 0..<999 { try log.append(noisyPayload(i, size: 900)) }
        // Written, not synced: a synced write preallocates zeros past the data, which the
        // files' sizes would count.
        try log.appendBlocking(noisyPayload(999, size: 900), durability: .written)
        let stats = log.stats()
        #expect(stats.storedBytes > 3 * UInt64(cap), "the records filled several segments")
        let onDisk = dir.segments().reduce(Int64(0)) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: dir.file(name))[.size] as? Int64) ?? 0)
        }
        #expect(onDisk <= Int64(cap), "segment files take \(onDisk) bytes under a cap of \(cap)")
        #expect(stats.diskBytes == onDisk)
        #expect(stats.droppedRecords == log.firstSeq, "every record below the oldest stored one was counted")
        // A reader is told of the drop, then reads every record still stored.
        let items = try log.readAll(from: 0)
        let dropped = items.compactMap { if case .notice(let notice) = $0, notice.kind == .dropped { notice.range } else { nil } }
        #expect(dropped == [0..<log.firstSeq])
        #expect(records(items).map(\.seq) == Array(log.firstSeq..<1000))
        try log.close()
    }

    @Test func rejectNewCapRefusesAppendsAndHarmsNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = rollingConfiguration()
        configuration.maxBytes = 128 * 1024
        configuration.capPolicy = .rejectNew
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        var accepted = 0
        var refusal: SpoolError?
        for i in 0..<1000 {
            do {
                try log.appendBlocking(noisyPayload(i, size: 900), durability: .written)
                accepted += 1
            } catch let error as SpoolError {
                refusal = error
                break
            }
        }
        #expect(refusal?.code == .full)
        #expect(refusal?.message.contains("131072") == true)
        #expect(log.stats().diskBytes <= 128 * 1024)
        #expect(records(try log.readAll()).map(\.payload) == (0..<accepted).map { noisyPayload($0, size: 900) })
        try log.close()
    }

    @Test func expiredRecordsAreSkippedCountedAndNeverDelivered() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.maxAge = .milliseconds(300)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<20 { try log.append(payload(i)) }
        try log.syncBlocking()
        Thread.sleep(forTimeInterval: 0.5)
        for i in 20..<25 { try log.append(payload(i)) }
        try log.syncBlocking()
        let consumer = try log.consumer(named: "c")
        let batch = try consumer.read(maxCount: 100)
        #expect(batch.records.map(\.seq) == Array(20..<25))
        #expect(batch.notices == [ReadNotice(kind: .expired, range: 0..<20, detail: "older than Configuration.maxAge")])
        #expect(batch.endSeq == 25)
        #expect(log.stats().expiredRecords == 20)
        try log.close()
    }

    @Test func reportingDeadlineFollowsGoogleAnalyticsRule() {
        // UTC+2: a record at 2026-01-01 23:30 local expires at 2026-01-02 04:00 local.
        let rule = ReportingDeadline(hour: 4, utcOffsetSeconds: 7200)
        let recordLocal: Int64 = 1_767_310_200_000  // 2026-01-01T23:30:00Z
        let record = recordLocal - 7_200_000
        let expected: Int64 = 1_767_326_400_000 - 7_200_000  // 2026-01-02T04:00:00 local
        #expect(rule.expiry(ofRecordAt: record) == expected)
        // A timestamp is whatever a file says: the extremes expire at a bounded instant, no trap.
        for extreme in [Int64.max, Int64.min, Int64.max - 1, Int64.min + 1] {
            let expiry = ReportingDeadline(hour: 23, utcOffsetSeconds: -ReportingDeadline.maxUTCOffsetSeconds).expiry(ofRecordAt: extreme)
            #expect(abs(expiry) <= (1 << 60) + 2 * 86_400_000)
        }
    }
}
