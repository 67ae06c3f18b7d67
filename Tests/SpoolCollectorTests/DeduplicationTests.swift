import Foundation
import Testing
@testable import SpoolCollector

/// A record whose id was already received is counted as a duplicate and not recorded again.
@Suite struct DeduplicationTests {
    @Test func sameBatchTwiceIsRecordedOnce() async throws {
        let directory = try temporaryDirectory()
        let path = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start { $0.outputPath = path }
        let first = try await server.post(batch: body(.json, seqs: 0...9), seqs: 0...9, format: .json)
        let second = try await server.post(batch: gzip(body(.json, seqs: 0...9)), seqs: 0...9, format: .json, coding: "gzip")
        await server.collector.stop()

        #expect(first.body == #"{"accepted":10,"duplicates":0,"conflicts":0}"#)
        #expect(second.status == 200)
        #expect(second.body == #"{"accepted":0,"duplicates":10,"conflicts":0}"#)
        #expect(server.collector.records().map(\.seq) == Array(0...9))
        #expect(server.collector.stats.received == 10)
        #expect(server.collector.stats.duplicates == 10)
        #expect(server.collector.stats.acceptedBatches == 2)
        #expect(try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").count == 10)
        try FileManager.default.removeItem(at: directory)
    }

    @Test func overlappingBatchesRecordOnlyTheNewPart() async throws {
        let server = try await TestServer.start()
        _ = try await server.post(batch: body(.ndjson, seqs: 0...9), seqs: 0...9, format: .ndjson)
        let overlap = try await server.post(batch: body(.raw, seqs: 5...14), seqs: 5...14, format: .raw)
        let other = try await server.post(batch: body(.json, log: otherLog, seqs: 5...14), log: otherLog, seqs: 5...14, format: .json)
        await server.collector.stop()

        #expect(overlap.body == #"{"accepted":5,"duplicates":5,"conflicts":0}"#)
        #expect(other.body == #"{"accepted":10,"duplicates":0,"conflicts":0}"#, "the same seqs from another log are not duplicates")
        let records = server.collector.records()
        #expect(records.filter { $0.logID == testLog }.map(\.seq) == Array(0...14))
        #expect(records.filter { $0.logID == otherLog }.map(\.seq) == Array(5...14))
        #expect(server.collector.stats.duplicates == 5)
        #expect(server.collector.stats.received == 25)
    }

    @Test func batchRetriedAfterAGapIsStillDeduplicated() async throws {
        let server = try await TestServer.start()
        _ = try await server.post(batch: body(.json, seqs: 0...4), seqs: 0...4, format: .json)
        _ = try await server.post(batch: body(.json, seqs: 20...24), seqs: 20...24, format: .json)
        let retry = try await server.post(batch: body(.json, seqs: 20...29), seqs: 20...29, format: .json)
        let late = try await server.post(batch: body(.json, seqs: 5...9), seqs: 5...9, format: .json)
        await server.collector.stop()

        #expect(retry.body == #"{"accepted":5,"duplicates":5,"conflicts":0}"#)
        #expect(late.body == #"{"accepted":5,"duplicates":0,"conflicts":0}"#)
        #expect(server.collector.records().map(\.seq) == Array(0...4) + Array(20...29) + Array(5...9))
    }

    @Test func receivedSeqsMergeRangesAndAdvanceTheWatermark() {
        var seqs = ReceivedSeqs()
        for seq: UInt64 in [5, 7, 6, 2, 0] {
            let inserted = seqs.insert(seq)
            #expect(inserted)
        }
        #expect(seqs.watermark == 1)
        #expect(seqs.ranges == [2..<3, 5..<8])
        let inserted6 = seqs.insert(6)
        #expect(!inserted6)
        let inserted0 = seqs.insert(0)
        #expect(!inserted0)
        let inserted1 = seqs.insert(1)
        #expect(inserted1)
        #expect(seqs.watermark == 3)
        let inserted4 = seqs.insert(4)
        #expect(inserted4)
        let inserted3 = seqs.insert(3)
        #expect(inserted3)
        #expect(seqs.watermark == 8)
        #expect(seqs.ranges.isEmpty)
        #expect((0..<8).allSatisfy { seqs.contains($0) })
        #expect(!seqs.contains(8))
    }

    @Test func receivedSeqsMemoryIsBoundedByForgettingTheLowestRangeNeverAGap() {
        var seqs = ReceivedSeqs()
        // Every other seq: each one opens a new gap.
        for index in 0...UInt64(ReceivedSeqs.maxRanges) { seqs.insert(1 + 2 * index) }
        #expect(seqs.ranges.count == ReceivedSeqs.maxRanges)
        #expect(seqs.watermark == 0, "no gap is given up: seq 0 never arrived")
        #expect(!seqs.contains(0))
        #expect(!seqs.contains(1), "the lowest range (seq 1) was forgotten: recorded again if it comes back")
        #expect(seqs.contains(3))
        #expect(!seqs.contains(4))
        let inserted = (seqs.insert(0), seqs.insert(1), seqs.insert(2))
        #expect(inserted == (true, true, true))
        #expect(seqs.watermark == 4, "the watermark moves once the gaps are filled")
    }

    /// Duplicate tracking is bounded by ``CollectorConfiguration/maxTrackedLogs``: one-record
    /// batches from 300 new log ids keep at most 20 logs' seqs, the forgetting is counted, the
    /// most recent log is still deduplicated and a forgotten one is recorded again (issue #21, item 8).
    @Test func duplicateTrackingForgetsTheLeastRecentlySeenLogsPastItsBound() async throws {
        let server = try await TestServer.start { $0.maxTrackedLogs = 20 }
        let logs = (0..<300).map { String(format: "%032x", $0 + 1) }
        for log in logs {
            let answer = try await server.post(batch: body(.json, log: log, seqs: 0...0), log: log, seqs: 0...0, format: .json)
            #expect(answer.status == 200)
        }
        let tracked = server.collector.ledger.withLock { $0.trackedLogs }
        let recent = try await server.post(batch: body(.json, log: logs[299], seqs: 0...0), log: logs[299], seqs: 0...0, format: .json)
        let forgotten = try await server.post(batch: body(.json, log: logs[0], seqs: 0...0), log: logs[0], seqs: 0...0, format: .json)
        await server.collector.stop()

        #expect(tracked <= 20)
        #expect(server.collector.stats.forgottenLogs >= 280)
        #expect(recent.body == #"{"accepted":0,"duplicates":1,"conflicts":0}"#)
        #expect(forgotten.body == #"{"accepted":1,"duplicates":0,"conflicts":0}"#)
    }
}
