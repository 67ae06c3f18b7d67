import Foundation
import Synchronization
import SystemPackage
import Testing
@testable import Spool

/// The two-stage group commit on a schedule chosen by hand: every `fdatasync` of the log waits
/// at a gate (`FaultInjection.Fault.hold`) until the test releases it, with success or an
/// error, so the test sees what the log does while a group's sync is in flight. The seeded
/// lifecycle simulator (`LogLifecycleSimulationTests`) tries the interleavings no test names.
@Suite struct PipelinedCommitTests {
    /// An append on a thread of its own (the blocking API), whose outcome the test reads.
    final class Caller: Sendable {
        private let outcome = Mutex<Result<UInt64, SpoolError>?>(nil)

        init(_ log: EventLog, _ payload: [UInt8], _ durability: Durability) {
            Thread.detachNewThread { [self] in
                let result = Result { try log.appendBlocking(payload, durability: durability) }
                    .mapError { $0 as? SpoolError ?? SpoolError(.io, "\($0)") }
                outcome.withLock { $0 = result }
            }
        }

        var result: Result<UInt64, SpoolError>? { outcome.withLock { $0 } }
        var isDone: Bool { result != nil }
        var succeeded: Bool { if case .success = result { true } else { false } }
        var failed: Bool { if case .failure = result { true } else { false } }
    }

    /// Opens a log (its own syncs at open pass) and arms the gate on every sync after.
    private func openGated(_ dir: TemporaryDirectory, _ gate: FaultGate,
                           configuration: Configuration = smallConfiguration(blockSize: 64 * 1024, segmentSize: 16 << 20)) throws -> EventLog {
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        FaultInjection.arm(.sync, under: dir.path, times: .max, fault: .hold(gate))
        return log
    }

    /// Disarms the faults, closes the log (`failed`: it failed, and close may say so), and
    /// reopens it: the records stored, once `verify` found the log clean.
    private func closeAndReopen(_ log: EventLog, _ dir: TemporaryDirectory, failed: Bool = false) throws -> [Record] {
        FaultInjection.disarm(under: dir.path)
        if failed { try? log.close() } else { try log.close() }
        let reopened = try EventLog.open(directory: dir.path)
        defer { try? reopened.close() }
        #expect(try reopened.verify().isClean)
        return records(try reopened.readAll())
    }

    @Test func theNextGroupIsWrittenWhileAGroupSyncs() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let gate = FaultGate()
        let log = try openGated(dir, gate)
        let first = Caller(log, payload(0), .synced)
        #expect(eventually { gate.arrivals == 1 }, "the first group's sync reaches the gate")
        #expect(log.writtenEnd == 1 && log.syncedEnd == 0)
        // While it is held: a `written` caller is answered, and the next synced group is
        // compressed and written into the file, but not answered.
        try log.appendBlocking(payload(1), durability: .written)
        let second = Caller(log, payload(2), .synced)
        #expect(eventually { log.writtenEnd == 3 }, "the pipeline wrote the next group during the sync")
        #expect(gate.arrivals == 1 && log.syncedEnd == 0)
        #expect(log.stats().blocksWrittenDuringSync == 2, "the written record's block and the next group's")
        #expect(!first.isDone && !second.isDone, "no synced caller resumes before its sync ends")
        gate.release()
        #expect(eventually { first.succeeded })
        #expect(eventually { gate.arrivals == 2 }, "the next group's sync starts, its blocks already written")
        #expect(log.syncedEnd == 1, "the first sync made durable what was written when it began, no more")
        #expect(!second.isDone, "the second group waits for its own sync")
        gate.release()
        #expect(eventually { second.succeeded })
        #expect(log.syncedEnd == 3)
        #expect(try closeAndReopen(log, dir).map(\.payload) == [payload(0), payload(1), payload(2)])
    }

    @Test func aFailedSyncFailsItsGroupAndTheOnesAfterItNeverAnEarlierOne() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let gate = FaultGate()
        let log = try openGated(dir, gate)
        let first = Caller(log, payload(0), .synced)
        #expect(eventually { gate.arrivals == 1 })
        let second = Caller(log, payload(1), .synced)
        #expect(eventually { log.writtenEnd == 2 })
        gate.release()
        #expect(eventually { first.succeeded }, "the first group's sync succeeded")
        #expect(eventually { gate.arrivals == 2 }, "the second group's sync is held")
        let third = Caller(log, payload(2), .synced)
        #expect(eventually { log.writtenEnd == 3 }, "the third group is written during the second's sync")
        gate.release(failingWith: .ioError)
        #expect(eventually { second.isDone && third.isDone })
        #expect(second.failed, "the failed sync's own group fails")
        #expect(third.failed, "and the group written after it")
        #expect(first.succeeded, "the group an earlier sync served keeps its answer")
        #expect(log.syncedEnd == 1)
        #expect(log.writeError?.code == .failed)
        #expect(throws: SpoolError.self) { try log.appendBlocking(payload(3), durability: .written) }
        #expect(try closeAndReopen(log, dir, failed: true).first?.payload == payload(0), "the acknowledged record is stored")
    }

    @Test func aWriteDuringASyncNeverRollsTheSegmentTheSyncHolds() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanupFaults() }
        let gate = FaultGate()
        var configuration = smallConfiguration(blockSize: 1024, segmentSize: 64 * 1024)
        configuration.linger = .zero
        let log = try openGated(dir, gate, configuration: configuration)
        let first = Caller(log, noisyPayload(0, size: 600), .synced)
        #expect(eventually { gate.arrivals == 1 })
        let segmentsBefore = dir.segments()
        // Far more than the active segment holds: the pipeline writes up to the roll, then waits.
        let many = Caller(log, noisyPayload(1, size: 600), .written)
        #expect(eventually { many.succeeded })
        for i in 2..<300 { try log.append(noisyPayload(i, size: 600)) }
        // The pipeline writes until a block needs a new segment, then stops until the sync ends.
        #expect(eventually { log.lock.withLock { log.state.group.pipelineBlocked } }, "the pipeline stopped at the roll")
        #expect(dir.segments() == segmentsBefore, "no segment rolled while its sync was held")
        #expect(log.writtenEnd < 300, "the blocks past the roll wait for the sync's end")
        #expect(!first.isDone)
        // From here on, every sync passes (the rolls' syncs included).
        FaultInjection.disarm(under: dir.path)
        gate.release()
        #expect(eventually { first.succeeded })
        try log.syncBlocking()
        #expect(dir.segments().count > segmentsBefore.count)
        #expect(try closeAndReopen(log, dir).map(\.payload) == (0..<300).map { noisyPayload($0, size: 600) })
    }

    /// Many callers at every level against a slow disk (each sync 2 ms): syncs overlap with
    /// writes all the time; every record is stored once, in order, and each synced caller's
    /// record was below `syncedEnd` when it returned (with the sync tracker on, so its record
    /// of what each sync covers is taken while writes run beside the syncs).
    @Test func manyCallersAgainstASlowDiskLoseAndRepeatNothing() async throws {
        let dir = TemporaryDirectory.trackingSyncs()
        defer { dir.cleanupFaults() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 4096, segmentSize: 256 * 1024))
        FaultInjection.arm(.sync, under: dir.path, times: .max, fault: .delay(.milliseconds(2)))
        let notDurable = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<16 {
                group.addTask {
                    var early = 0
                    for i in 0..<60 {
                        let level: Durability = (task + i) % 3 == 0 ? .written : .synced
                        let seq = try await log.append(noisyPayload(task * 1000 + i, size: 200), durability: level)
                        if level == .synced && log.syncedEnd <= seq { early += 1 }
                    }
                    return early
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(notDurable == 0, "a synced append returned before its record was synced")
        #expect(log.stats().blocksWrittenDuringSync > 0, "with syncs of 2 ms, some blocks arrive while one runs")
        let read = try closeAndReopen(log, dir)
        #expect(read.map(\.seq) == Array(0..<UInt64(16 * 60)))
        var expected = Set<[UInt8]>()
        for task in 0..<16 { for i in 0..<60 { expected.insert(noisyPayload(task * 1000 + i, size: 200)) } }
        #expect(Set(read.map(\.payload)) == expected)
    }
}
