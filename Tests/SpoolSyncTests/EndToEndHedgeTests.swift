import Testing
@testable import SpoolSync

/// Hedged requests over real HTTP on 127.0.0.1, against the reference collector answering a
/// tenth of the requests a second late: every record arrives, and the only repeats the
/// collector drops (by id) are the hedged batches'.
@Suite(.serialized) struct EndToEndHedgeTests {
    @Test(arguments: [true, false])
    func aHedgedDrainDeliversEveryRecordAndRepeatsOnlyTheHedgedBatches(hedging: Bool) async throws {
        let rig = try await EndToEndTests.Rig.make { faults in
            faults.latency = .milliseconds(5)
            faults.slowRate = 0.1
            faults.slowLatency = .seconds(1)
        }
        try await rig.append(4_000)
        let worker = try rig.worker {
            $0.maxBatchCount = 20
            $0.concurrency = .fixed(8)
            $0.hedging = hedging
            $0.requestTimeout = .seconds(10)  // a slow answer is slow, not a timeout, on a loaded machine
        }
        let report = await worker.flush(retries: EndToEndTests.retries)
        #expect(report.failure == nil)
        #expect(report.records == 4_000)
        #expect(rig.receivedSeqs.sorted() == Array(0..<4_000))
        let stats = await worker.stats
        let duplicates = rig.collector.stats.duplicates
        // Any request past one a batch may repeat its batch (20 records); with no failure, the
        // only such requests are hedges.
        #expect(duplicates <= (stats.requests - stats.batches) * 20)
        if hedging {
            #expect(stats.hedges > 0)
            #expect(stats.hedges * Hedging.cost <= stats.requests - stats.hedges)
        } else {
            #expect(stats.hedges == 0)
        }
        if stats.failures.isEmpty {
            // The loser may be cancelled before the collector records it: at most, not exactly.
            #expect(duplicates <= stats.hedges * 20, "\(stats)")
        }
        #expect(try rig.log.consumer(named: "uploader").committed == 4_000)
        await worker.stop()
        await rig.tearDown()
    }
}
