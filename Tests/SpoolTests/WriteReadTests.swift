import Foundation
import Synchronization
import Testing
@testable import Spool

@Suite struct WriteReadTests {
    @Test func crc32cMatchesTheStandardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        // Continuing a checksum equals checksumming the concatenation.
        let whole = CRC32C.checksum(Array("hello, world".utf8))
        let first = CRC32C.checksum(Array("hello, ".utf8))
        let continued = Array("world".utf8).withUnsafeBytes { CRC32C.checksum($0, continuing: first) }
        #expect(whole == continued)
    }

    @Test func appendedRecordsReadBackInOrderAcrossReopen() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        for i in 0..<20000 {
            let seq = try log.append(payload(i))
            #expect(seq == UInt64(i))
        }
        try await log.sync()
        let items = try log.readAll()
        #expect(notices(items).isEmpty)
        #expect(records(items).map(\.payload) == (0..<20000).map { payload($0) })
        #expect(records(items).map(\.seq) == (0..<20000).map(UInt64.init))
        try log.close()
        #expect(dir.segments().count > 1, "64 KiB segments must have rolled")

        let reopened = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        #expect(reopened.nextSeq == 20000)
        #expect(reopened.id == log.id)
        let again = try reopened.readAll(from: 15000)
        #expect(records(again).map(\.seq) == (15000..<20000).map(UInt64.init))
        #expect(try reopened.append(payload(20000)) == 20000)
        try reopened.close()
    }

    @Test func writtenAndSyncedAppendsReturnOnceStored() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        let seq = try await log.append(payload(0), durability: .written)
        #expect(log.writtenEnd > seq)
        let synced = try await withThrowingTaskGroup(of: UInt64.self) { group in
            for i in 0..<64 {
                group.addTask { try await log.append(payload(i), durability: .synced) }
            }
            var seqs = [UInt64]()
            for try await s in group { seqs.append(s) }
            return seqs
        }
        #expect(Set(synced).count == 64)
        #expect(log.syncedEnd > synced.max()!)
        let stats = log.stats()
        #expect(stats.fsyncs >= 1)
        #expect(stats.fsyncs < 64, "64 concurrent synced appends share fsyncs (group commit)")
        try log.close()
    }

    /// Waits take exclusive ends, as every offset: `before: 0` is nothing to wait for, `before:
    /// nextSeq` covers every record appended, and an end past `nextSeq` names what is wrong.
    @Test func waitsTakeExclusiveEnds() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration())
        defer { try? log.close() }
        try await log.waitUntil(before: 0, is: .synced)
        try log.waitUntilBlocking(before: 0, is: .synced)
        for i in 0..<10 { try log.append(payload(i)) }
        try await log.waitUntil(before: log.nextSeq, is: .written)
        #expect(log.writtenEnd == 10)
        try log.waitUntilBlocking(before: 10, is: .synced)
        #expect(log.syncedEnd == 10)
        #expect { try log.waitUntilBlocking(before: 11, is: .written) } throws: {
            ($0 as? SpoolError)?.code == .invalidArgument && "\($0)".contains("next seq is 10")
        }
        await #expect { try await log.waitUntil(before: 11, is: .synced) } throws: {
            ($0 as? SpoolError)?.code == .invalidArgument
        }
    }

    @Test func timestampsAreWallClockMilliseconds() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(1), durability: .written)
        let after = Int64(Date().timeIntervalSince1970 * 1000)
        let record = try #require(records(try log.readAll()).first)
        #expect(record.timestamp >= before - 1 && record.timestamp <= after + 1)
        try log.close()
    }

    /// A record of the largest allowed size after small ones in the same linger window: it
    /// starts a block of its own, so no block passes the format's raw-length bound (a reader
    /// would reject it as corrupt, and recovery would cut it as a torn tail).
    @Test func aRecordAtTheSizeLimitAfterOthersStaysReadable() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.maxRecordSize = 64 * 1024 * 1024
        configuration.maxPendingBytes = 2 * configuration.maxRecordSize + 1024 * 1024
        configuration.linger = .seconds(60)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<3 { try log.append(payload(i)) }
        let big = [UInt8](repeating: 7, count: configuration.maxRecordSize)
        try log.appendBlocking(big, durability: .synced)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path, configuration: configuration)
        #expect(reopened.recoveryReport.tornTail == nil)
        #expect(try reopened.verify().isClean)
        let items = try reopened.readAll()
        #expect(notices(items).isEmpty)
        #expect(records(items).map(\.payload.count) == [payload(0).count, payload(1).count, payload(2).count, big.count])
        try reopened.close()
    }

    @Test func oversizedRecordIsRefusedAndNothingElseIsAffected() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.maxRecordSize = 1000
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        try log.append(payload(0))
        #expect {
            try log.append([UInt8](repeating: 1, count: 1001))
        } throws: { error in
            let e = error as! SpoolError
            return e.code == .recordTooLarge && e.message.contains("1001") && e.message.contains("1000")
        }
        try log.appendBlocking(payload(1), durability: .written)
        #expect(records(try log.readAll()).map(\.seq) == [0, 1])
        try log.close()
    }

    /// Durations a configuration accepts convert without trapping: a segment age of
    /// `.seconds(Int64.max)` (valid: positive) means never, it trapped on the first roll check.
    @Test func hugeDurationsSaturateInsteadOfTrapping() throws {
        #expect(Duration.seconds(Int64.max).wholeNanoseconds == .max)
        #expect(Duration.seconds(Int64.min).wholeNanoseconds == .min)
        // Whole seconds fit, the fraction carries past Int64.max.
        #expect(Duration(secondsComponent: 9_223_372_036, attosecondsComponent: 900_000_000_000_000_000).wholeNanoseconds == .max)
        #expect(Duration.milliseconds(1500).wholeNanoseconds == 1_500_000_000)
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = smallConfiguration()
        configuration.segmentMaxAge = .seconds(Int64.max)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<3 { try log.appendBlocking(payload(i), durability: .written) }
        #expect(dir.segments().count == 1)
        #expect(records(try log.readAll()).count == 3)
        try log.close()
    }

    @Test(arguments: ["blockSize", "linger", "compressionLevel", "segmentSize", "maxRecordSize", "maxBytes", "maxPendingBytes",
                      "maxAge", "reportingDeadline.hour", "reportingDeadline.utcOffsetSeconds"])
    func invalidConfigurationNamesTheField(field: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        switch field {
        case "blockSize": configuration.blockSize = 0
        case "linger": configuration.linger = .milliseconds(-1)
        case "compressionLevel": configuration.compressionLevel = 99
        case "segmentSize": configuration.segmentSize = 10
        case "maxRecordSize": configuration.maxRecordSize = 0
        case "maxBytes": configuration.maxBytes = 5
        // Accepted, it trapped on every read (its milliseconds overflowed).
        case "maxAge": configuration.maxAge = .seconds(Int64.max)
        case "reportingDeadline.hour": configuration.reportingDeadline = .init(hour: 28, utcOffsetSeconds: 0)
        // Hours typed where seconds belong would pass as 2 s; 20 hours is no time zone.
        case "reportingDeadline.utcOffsetSeconds": configuration.reportingDeadline = .init(hour: 4, utcOffsetSeconds: 20 * 3600)
        default: configuration.maxPendingBytes = 1
        }
        #expect {
            try EventLog.open(directory: dir.path, configuration: configuration)
        } throws: { error in
            let e = error as! SpoolError
            return e.code == .invalidConfiguration && e.message.contains(field)
        }
    }

    @Test func secondOpenerGetsLocked() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        #expect { try EventLog.open(directory: dir.path) } throws: { ($0 as! SpoolError).code == .locked }
        try log.close()
        let again = try EventLog.open(directory: dir.path)
        try again.close()
    }

    @Test func filesAndDirectoriesArePrivate() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let logPath = dir.path + "/nested/log"
        let log = try EventLog.open(directory: logPath)
        try log.appendBlocking(payload(0), durability: .synced)
        _ = try log.consumer(named: "uploader")
        try log.close()
        func mode(_ path: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions]) as? Int) ?? -1
        }
        #expect(mode(logPath) == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: logPath) where name != "consumers" {
            #expect(mode(logPath + "/" + name) == 0o600, "\(name)")
        }
        #expect(mode(logPath + "/consumers/uploader.offset") == 0o600)
    }

    @Test func blockingAndAsyncSyncMakeEverythingDurable() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<100 { try log.append(payload(i)) }
        try await log.sync()
        #expect(log.syncedEnd == 100)
        for i in 100..<150 { try log.append(payload(i)) }
        try log.syncBlocking()
        #expect(log.syncedEnd == 150)
        try log.close()
    }

    @Test func aCancelledWriteObserverIsNotCalledAgain() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        let kept = Mutex<[UInt64]>([])
        let cancelled = Mutex<[UInt64]>([])
        log.observeWrites { end in kept.withLock { $0.append(end) } }
        let observation = log.observeWrites { end in cancelled.withLock { $0.append(end) } }
        try log.appendBlocking(payload(0), durability: .written)
        observation.cancel()
        observation.cancel()  // harmless
        try log.appendBlocking(payload(1), durability: .written)
        try log.appendBlocking(payload(2), durability: .written)
        // After close every notification has been made (the writer thread has exited, and a
        // caller's own write notifies before its append returns).
        try log.close()
        #expect(cancelled.withLock { $0 } == [1])
        #expect(kept.withLock { $0 } == [1, 2, 3])
    }

    @Test func appendAfterCloseThrowsClosed() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        try log.append(payload(0))
        try log.close()
        #expect { try log.append(payload(1)) } throws: { ($0 as! SpoolError).code == .closed }
        try log.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.nextSeq == 1, "close wrote the pending record")
        try reopened.close()
    }

    /// Closing again (one after another, or from several threads at once) must not close a
    /// descriptor a second time: by then that number may belong to someone else's file.
    @Test func closingAgainLeavesOtherDescriptorsAlone() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        func descriptorsAreOpen(_ fds: [Int32]) -> Bool { fds.allSatisfy { fcntl($0, F_GETFD) != -1 } }
        let log = try EventLog.open(directory: dir.path)
        try log.appendBlocking(payload(0), durability: .synced)
        try log.close()
        // Likely to be given the numbers the log just released.
        let others = (0..<8).map { open(dir.file("other-\($0)"), O_CREAT | O_RDWR | O_CLOEXEC, 0o600) }
        #expect(others.allSatisfy { $0 >= 0 })
        try log.close()
        #expect(descriptorsAreOpen(others), "a second close closed someone else's descriptor")

        let concurrent = try EventLog.open(directory: dir.path)
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Thread.detachNewThread {
                try? concurrent.close()
                group.leave()
            }
        }
        group.wait()
        #expect(descriptorsAreOpen(others), "concurrent closes closed someone else's descriptor")
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.nextSeq == 1)
        try reopened.close()
        for fd in others { close(fd) }
    }
}
