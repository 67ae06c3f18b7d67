import Foundation
import Synchronization
import Testing
@testable import Spool

/// A segment file removed behind the log's back (a cleaner sweeping a temporary directory, a
/// person) must be reported as missing records, not looked for for ever.
@Suite struct RemovedSegmentTests {
    @Test func aSegmentRemovedOutsideSpoolReadsAsMissing() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: rollingConfiguration())
        defer { try? log.close() }
        let count = 300
        let names = try appendAcrossSegments(log, in: dir, count: count)
        try #require(names.count >= 3)
        let consumer = try log.consumer(named: "uploader")
        try FileManager.default.removeItem(atPath: dir.file(names[1]))
        let gone = UInt64(names[1].dropLast(4))!..<UInt64(names[2].dropLast(4))!

        let items = try within(seconds: 30) { try log.readAll() }?.get()
        #expect(items.map(notices)?.map(\.range) == [gone])
        #expect(items.map(notices)?.map(\.kind) == [.missing])
        #expect(items.map(records)?.map(\.seq) == (0..<UInt64(count)).filter { !gone.contains($0) })

        // The consumer meets the same notice, commits past it, and reaches the end.
        let delivered = try within(seconds: 30) { () -> [UInt64] in
            var seqs = [UInt64]()
            for _ in 0..<count {
                let batch = try consumer.read(maxCount: 50)
                if batch.isEmpty { break }
                seqs += batch.records.map(\.seq)
                try consumer.commit(batch)
            }
            return seqs
        }?.get()
        #expect(delivered == (0..<UInt64(count)).filter { !gone.contains($0) })
    }

    /// The other side: segments retention deletes while readers read are never mistaken for
    /// segments removed outside Spool (retention forgets a segment before unlinking it).
    @Test func segmentsRetentionDeletesUnderAReaderAreNeverReportedMissing() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path, configuration: rollingConfiguration())
        defer { try? log.close() }
        let count = 2000
        let names = try appendAcrossSegments(log, in: dir, count: count)
        try #require(names.count >= 10)
        let consumer = try log.consumer(named: "uploader")
        let finished = Atomic<Bool>(false)
        let kinds = ResultBox<Set<ReadNotice.Kind>>()
        kinds.set(.success([]))
        let reading = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            var seen = Set<ReadNotice.Kind>()
            do {
                // A few items from the start, again and again: each pass opens the oldest listed
                // segment, the next one retention deletes.
                while !finished.load(ordering: .acquiring) {
                    let reader = log.reader(from: 0)
                    for _ in 0..<3 {
                        if case .notice(let notice) = try reader.next() { seen.insert(notice.kind) }
                    }
                }
                kinds.set(.success(seen))
            } catch {
                kinds.set(.failure(error))
            }
            reading.signal()
        }
        var committed: UInt64 = 0
        while committed < UInt64(count) {
            let batch = try consumer.read(maxCount: 20)
            try #require(!batch.isEmpty)
            try consumer.commit(batch)  // durable: retention runs
            committed = batch.endSeq
        }
        finished.store(true, ordering: .releasing)
        reading.wait()
        #expect(log.firstSeq > 0, "retention deleted segments")
        let seen = try kinds.get()!.get()
        #expect(!seen.contains(.missing), "a segment retention deleted was reported missing")
    }
}
