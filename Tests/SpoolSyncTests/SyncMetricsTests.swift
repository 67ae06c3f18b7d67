import Foundation
import Metrics
import MetricsTestKit
import Spool
import Testing
@testable import SpoolSync

/// The `spool_sync_*` metrics, observed through a test backend, agree with `stats`.
@Suite struct SyncMetricsTests {
    @Test func hedgedRequestsAreCounted() throws {
        let metrics = TestMetrics()
        let sync = SyncMetrics(consumer: "uploader", factory: metrics)
        var stats = SyncStats()
        stats.requests = 60
        stats.hedges = 3
        sync.record(from: SyncStats(), to: stats)
        #expect(try metrics.expectCounter("spool_sync_hedges_total", [("consumer", "uploader")]).totalValue == 3)
    }

    @Test func metricsMatchTheStatsSnapshot() async throws {
        let metrics = TestMetrics()
        let consumer = MemoryConsumer(records: 120)
        // The first request fails with 503 and is retried; everything else is accepted.
        let uploader = ScriptedUploader { _, index in UploadResponse(status: index == 0 ? 503 : 200) }
        let worker = try SyncWorker(
            consumer: consumer, uploader: uploader, configuration: .manual, deadLetters: nil,
            clock: ContinuousClock(), random: { 0 }, wallClock: { 784_111_777 }, metricsFactory: metrics)
        let report = await worker.flush(retries: 2)
        #expect(report.failure == nil)
        let stats = await worker.stats
        let labels = [("consumer", consumer.name)]
        #expect(stats.retries == 1)
        #expect(try metrics.expectCounter("spool_sync_retries_total", labels).totalValue == Int64(stats.retries))
        #expect(try metrics.expectCounter("spool_sync_records_total", labels).totalValue == Int64(stats.records))
        #expect(try metrics.expectCounter("spool_sync_bytes_total", labels).totalValue == Int64(stats.bytes))
        #expect(try metrics.expectCounter("spool_sync_uploads_total", labels + [("outcome", "accepted")]).totalValue == Int64(stats.batches))
        #expect(try metrics.expectCounter("spool_sync_uploads_total", labels + [("outcome", "serverError")]).totalValue == 1)
        #expect(stats.records == 120)
        #expect(stats.pending == 0)
        // The lag gauge rose with the records seen and fell to what the stats say.
        let pending = try metrics.expectGauge("spool_sync_pending", labels)
        #expect(pending.lastValue == Double(stats.pending))
        #expect(pending.values.first == 120)  // what was pending when the worker was made
    }
}
