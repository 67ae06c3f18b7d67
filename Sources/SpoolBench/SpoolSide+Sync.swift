import Foundation
import Spool
import SpoolCollector
import SpoolSync

extension SpoolSide {
    /// End to end: stores `count` events (untimed), starts the reference collector on
    /// 127.0.0.1, and times one `SyncWorker.flush()` that drains the log to it over HTTP —
    /// read, encode, POST, durable commit — in batches of `batch`, until empty.
    public func drainToCollector(batch: Int, count: Int, directory: String) async throws -> Run {
        try await blocking { try fill(count: count, directory: directory) }
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.retainsRecords = false
        let collector = Collector(configuration: collectorConfiguration)
        let port = try await collector.start()
        let log = try await blocking { try open(directory) }
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = batch
        configuration.maxBatchBytes = max(configuration.maxBatchBytes, batch * 1024)
        let worker = try SyncWorker(
            consumer: try log.consumer(named: "uploader"), url: URL(string: "http://127.0.0.1:\(port)/batch")!,
            configuration: configuration, logger: quietLogger)
        let start = monotonicNanos()
        let report = await worker.flush()
        let nanos = monotonicNanos() - start
        await worker.stop()
        await collector.stop()
        try await blocking { try log.close() }
        if let failure = report.failure { throw failure }
        guard report.records == count else {
            throw BenchError("the flush sent \(report.records) of \(count) events")
        }
        return Run(count: report.records, nanos: nanos)
    }
}
