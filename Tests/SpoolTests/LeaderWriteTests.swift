import Foundation
import Synchronization
import Testing
@testable import Spool

/// A blocking caller that finds the writer thread idle writes its own record on its own thread
/// (no hand-off to the writer and back); mixed with async callers and other threads, seqs stay
/// dense and every record is stored once.
@Suite struct LeaderWriteTests {
    @Test func aLoneBlockingCallerWritesOnItsOwnThread() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        let writers = Mutex<[UInt64]>([])
        // Observers run on the thread that wrote the batch.
        log.observeWrites { _ in writers.withLock { $0.append(UInt64(pthread_self())) } }
        let caller = UInt64(pthread_self())
        for i in 0..<50 {
            try log.appendBlocking(payload(i), durability: i % 2 == 0 ? .written : .synced)
        }
        let threads = writers.withLock { $0 }
        #expect(threads.count >= 50)
        #expect(threads.filter { $0 == caller }.count >= 45, "most writes should be the caller's own")
        #expect(records(try log.readAll()).map(\.payload) == (0..<50).map { payload($0) })
        try log.close()
    }

    @Test func blockingThreadsAndAsyncCallersShareTheWriterSafely() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: smallConfiguration(blockSize: 4096, segmentSize: 64 * 1024))
        let perThread = 300
        let threads = 6
        let done = DispatchGroup()
        let failures = Mutex<[String]>([])
        for t in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                defer { done.leave() }
                for i in 0..<perThread {
                    let level: Durability = (i + t) % 3 == 0 ? .synced : .written
                    do {
                        if i % 5 == 4 {
                            try log.append(noisyPayload(t * 10_000 + i, size: 120))
                        } else {
                            try log.appendBlocking(noisyPayload(t * 10_000 + i, size: 120), durability: level)
                        }
                    } catch {
                        failures.withLock { $0.append("\(error)") }
                    }
                }
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    for i in 0..<perThread {
                        try await log.append(noisyPayload(100_000 + task * 10_000 + i, size: 120), durability: i % 2 == 0 ? .synced : .written)
                    }
                }
            }
            try await group.waitForAll()
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            done.notify(queue: .global()) { continuation.resume() }
        }
        #expect(failures.withLock { $0 }.isEmpty)
        try log.syncBlocking()
        let read = records(try log.readAll())
        let total = (threads + 4) * perThread
        #expect(read.map(\.seq) == Array(0..<UInt64(total)))
        var expected = Set<[UInt8]>()
        for t in 0..<threads { for i in 0..<perThread { expected.insert(noisyPayload(t * 10_000 + i, size: 120)) } }
        for task in 0..<4 { for i in 0..<perThread { expected.insert(noisyPayload(100_000 + task * 10_000 + i, size: 120)) } }
        #expect(Set(read.map(\.payload)) == expected)
        #expect(dir.segments().count > 1, "segments rolled while callers wrote")
        try log.close()
        let reopened = try EventLog.open(directory: dir.path)
        #expect(reopened.recoveryReport.tornTail == nil)
        #expect(records(try reopened.readAll()).count == total)
        try reopened.close()
    }
}
