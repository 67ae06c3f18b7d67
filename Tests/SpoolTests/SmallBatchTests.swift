import Foundation
import Testing
@testable import Spool

/// A consumer whose `maxBytes` holds a few records reads a large block in many batches; each
/// batch that stops at `maxBytes` puts its last record back (a seek one record back).
@Suite struct SmallBatchTests {
    /// 1 MiB blocks and a long linger: `count` tiny records, synced, are one or two large blocks.
    func logOfTinyRecords(_ dir: TemporaryDirectory, count: Int) throws -> EventLog {
        var configuration = Configuration()
        configuration.blockSize = 1024 * 1024
        configuration.linger = .seconds(30)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        for i in 0..<count { try log.append(Array("r\(i)".utf8)) }
        try log.syncBlocking()
        return log
    }

    @Test func smallBatchesReadALargeBlockEveryRecordOnceInOrder() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let count = 3000
        let log = try logOfTinyRecords(dir, count: count)
        let consumer = try log.consumer(named: "c")
        var read = [Record]()
        var batches = 0
        while true {
            let batch = try consumer.read(maxCount: 50, maxBytes: 7 + batches % 5)
            guard let last = batch.records.last else { break }
            #expect(batch.notices.isEmpty)
            read += batch.records
            batches += 1
            try consumer.commit(upTo: last.seq + 1, mode: .fast)
        }
        #expect(batches > count / 4)
        #expect(read.map(\.seq) == (0..<UInt64(count)).map { $0 })
        #expect(read.map(\.payload) == (0..<count).map { Array("r\($0)".utf8) })
        try log.close()
    }

    @Test func aBatchStoppedByMaxBytesDoesNotWalkItsBlockAgain() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let count = 3000
        let log = try logOfTinyRecords(dir, count: count)
        let consumer = try log.consumer(named: "c")
        var delivered = 0
        while let last = try consumer.read(maxCount: 50, maxBytes: 10).records.last {
            delivered = Int(last.seq) + 1
            try consumer.commit(upTo: last.seq + 1, mode: .fast)
        }
        #expect(delivered == count)
        // Each put-back walking from the block's start would pass over ~count²/4 records.
        #expect(consumer.cursor.decoder.recordsPassedOver <= count, "\(consumer.cursor.decoder.recordsPassedOver)")
        try log.close()
    }
}
