import Foundation
import Metrics
import MetricsTestKit
import Testing
@testable import Spool

/// The swift-metrics instruments agree with the `stats()` snapshot.
@Suite struct MetricsTests {
    @Test func metricsMatchTheStatsSnapshot() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let metrics = TestMetrics()
        var configuration = rollingConfiguration()
        configuration.maxBytes = 256 * 1024
        let log = try EventLog.open(directory: dir.path, configuration: configuration, metricsFactory: metrics)
        for i in 0..<1500 {
            try log.append(noisyPayload(i, size: 600))
            if i % 100 == 0 { try log.syncBlocking() }
        }
        try log.syncBlocking()
        let stats = log.stats()
        let dimensions = [("log", dir.path)]
        #expect(try metrics.expectCounter("spool_appended_records", dimensions).totalValue == Int64(stats.appendedRecords))
        #expect(try metrics.expectCounter("spool_blocks_written", dimensions).totalValue == Int64(stats.blocksWritten))
        #expect(try metrics.expectCounter("spool_blocks_sealed_in_parallel", dimensions).totalValue == Int64(stats.blocksSealedInParallel))
        #expect(try metrics.expectCounter("spool_stored_bytes", dimensions).totalValue == Int64(stats.storedBytes))
        #expect(try metrics.expectCounter("spool_raw_bytes", dimensions).totalValue == Int64(stats.rawBytes))
        #expect(try metrics.expectCounter("spool_fsyncs", dimensions).totalValue == Int64(stats.fsyncs))
        #expect(stats.droppedRecords > 0)
        #expect(try metrics.expectCounter("spool_dropped_records", dimensions).totalValue == Int64(stats.droppedRecords))
        #expect(try metrics.expectGauge("spool_segments", dimensions).lastValue == Double(stats.segments))
        #expect(try metrics.expectGauge("spool_disk_bytes", dimensions).lastValue == Double(stats.diskBytes))
        try log.close()
    }

    @Test func recompressionIsCounted() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let metrics = TestMetrics()
        let log = try EventLog.open(directory: dir.path, configuration: RecompressionTests.configuration(), metricsFactory: metrics)
        defer { try? log.close() }
        try RecompressionTests.append(log, 0..<10_000)
        let report = try log.recompressSealedSegments()
        #expect(report.segmentsRewritten > 0)
        let stats = log.stats()
        let dimensions = [("log", dir.path)]
        #expect(try metrics.expectCounter("spool_segments_recompressed", dimensions).totalValue == Int64(stats.segmentsRecompressed))
        #expect(try metrics.expectCounter("spool_recompression_saved_bytes", dimensions).totalValue == Int64(stats.bytesSavedByRecompression))
        #expect(try metrics.expectGauge("spool_disk_bytes", dimensions).lastValue == Double(stats.diskBytes))
    }
}
