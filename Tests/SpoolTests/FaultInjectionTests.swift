import Foundation
import SystemPackage
import Testing
@testable import Spool

/// I/O errors injected at chosen system calls through the file layer's seam: the writer reports
/// the error, never acknowledges a record it did not store, and recovers.
@Suite struct FaultInjectionTests {
    @Test(arguments: [FaultInjection.Fault.error(.noSpace), .error(.ioError), .shortWrite(10)])
    func failedWriteIsReportedNotAcknowledgedAndRetried(fault: FaultInjection.Fault) async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path)
        try await log.append(payload(0), durability: .written)
        // The fault stays until disarmed, so the writer's own retries fail too.
        FaultInjection.arm(.write, under: dir.path, times: .max, fault: fault)
        await #expect {
            try await log.append(payload(1), durability: .written)
        } throws: { error in
            let code = (error as? SpoolError)?.code
            return (code == .diskFull || code == .io) && (error as? SpoolError)?.seq == 1
        }
        // While stalled, appends are refused with the same error; memory does not grow.
        #expect(throws: SpoolError.self) { try log.append(payload(2)) }
        // Waiting again for the failed append's record ends with the writer's next attempt
        // (still failing here), and names the record.
        await #expect {
            try await log.waitUntil(before: 2, is: .written)
        } throws: { ($0 as? SpoolError)?.seq == 1 }
        FaultInjection.disarm(under: dir.path)
        // The writer retries by itself; once the fault is gone, appending works again.
        var recovered = false
        for _ in 0..<100 {
            try await Task.sleep(for: .milliseconds(50))
            if (try? log.append(payload(2))) != nil {
                recovered = true
                break
            }
        }
        #expect(recovered)
        // The failed append's record kept seq 1: waiting for it again, not appending it twice.
        try await log.waitUntil(before: 2, is: .written)
        try await log.sync()
        // Record 1 was never acknowledged but stayed queued, so it is stored now, in order; no gap.
        #expect(records(try log.readAll()).map(\.payload) == [payload(0), payload(1), payload(2)])
        #expect(log.stats().writeErrors >= 1)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.verify().isClean)
        #expect(reopened.nextSeq == 3)
        try reopened.close()
    }

    @Test func aWriteThatFailsWhileClosingLeavesNothingCountedAsPending() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        var configuration = Configuration()
        configuration.linger = .seconds(30)  // the records wait in memory until close
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<10 { try log.append(payload(i)) }
        #expect(log.stats().pendingBytes > 0)
        FaultInjection.arm(.write, under: dir.path, times: .max, fault: .error(.noSpace))
        #expect(throws: SpoolError.self) { try log.close() }
        FaultInjection.disarm(under: dir.path)
        // Closing gave the records up (close() said so): none is still counted as pending.
        #expect(log.stats().pendingBytes == 0)
    }

    @Test func failedFsyncFailsTheLogUntilReopen() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path)
        try await log.append(payload(0), durability: .synced)
        FaultInjection.arm(.sync, under: dir.path + "/0", times: 1, fault: .error(.ioError))
        await #expect {
            try await log.append(payload(1), durability: .synced)
        } throws: { ($0 as? SpoolError)?.code == .failed && ($0 as? SpoolError)?.errno == .ioError }
        // PostgreSQL's lesson: a failed fsync is not retried; the log refuses writes until reopened.
        #expect { try log.append(payload(2)) } throws: { ($0 as? SpoolError)?.code == .failed }
        // A failed log still closes (its writer exits without writing more); nothing was pending.
        try log.close()
        FaultInjection.disarm(under: dir.path + "/0")
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.verify().isClean)
        let stored = records(try reopened.readAll()).map(\.payload)
        #expect(stored.first == payload(0), "the synced record survives")
        #expect(try reopened.appendBlocking(payload(9), durability: .synced) == UInt64(stored.count))
        try reopened.close()
    }

    /// The fdatasync that seals a full segment fails: the log fails as for any other fsync,
    /// instead of stalling, retrying the seal (which the kernel would let "succeed" with the
    /// dirty pages gone) and acknowledging the segment's records as durable later.
    @Test func failedFsyncSealingASegmentFailsTheLogUntilReopen() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        // `written` appends make no fsync of their own: the first one armed is the seal's.
        FaultInjection.arm(.sync, under: dir.path, times: 1, fault: .error(.ioError))
        var failure: SpoolError?
        for i in 0..<400 where failure == nil {
            do { try await log.append(noisyPayload(i, size: 900), durability: .written) } catch { failure = error as? SpoolError }
        }
        #expect(failure?.code == .failed)
        #expect(failure?.errno == .ioError)
        #expect(dir.segments().count == 1, "no segment follows a seal that failed")
        // A stalled log would retry within 100 ms, and the retried fdatasync would pass.
        try await Task.sleep(for: .milliseconds(400))
        await #expect {
            try await log.append(payload(0), durability: .written)
        } throws: { ($0 as? SpoolError)?.code == .failed }
        // The block that was to open the next segment was never written: close says so.
        #expect(throws: SpoolError.self) { try log.close() }
        FaultInjection.disarm(under: dir.path)
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.verify().isClean)
        try reopened.close()
    }

    @Test func failedOffsetCommitKeepsThePreviousOffset() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path)
        for i in 0..<10 { try log.append(payload(i)) }
        let consumer = try log.consumer(named: "c")
        try consumer.commit(upTo: 4)
        FaultInjection.arm(.write, under: dir.path + "/consumers", times: 1, fault: .error(.noSpace))
        #expect { try consumer.commit(upTo: 7) } throws: { ($0 as? SpoolError)?.code == .diskFull }
        #expect(consumer.committed == 4)
        try consumer.commit(upTo: 7)
        #expect(consumer.committed == 7)
        try log.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(try reopened.consumer(named: "c").committed == 7)
        try reopened.close()
    }

    @Test func failedSegmentCreationOnRollIsRetried() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let configuration = rollingConfiguration()
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        FaultInjection.arm(.open, under: dir.path, times: 2, fault: .error(.noSpace))
        var accepted = [Int]()
        for i in 0..<400 {
            if (try? log.append(noisyPayload(i, size: 900))) != nil { accepted.append(i) }
            if i % 20 == 0 { Thread.sleep(forTimeInterval: 0.01) }
        }
        for _ in 0..<100 where (try? log.syncBlocking()) == nil { Thread.sleep(forTimeInterval: 0.05) }
        try log.syncBlocking()
        #expect(dir.segments().count > 1)
        #expect(records(try log.readAll()).map(\.payload) == accepted.map { noisyPayload($0, size: 900) })
        try log.close()
    }
}
