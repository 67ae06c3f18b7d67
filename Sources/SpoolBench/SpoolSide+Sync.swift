import Foundation
import Spool
import SpoolCollector
import SpoolSync

extension SpoolSide {
    /// End to end: stores `count` events (untimed), starts the reference collector on
    /// 127.0.0.1, and times one `SyncWorker.flush()` that drains the log to it over HTTP —
    /// read, encode, POST, durable commit — in batches of `batch`, until empty.
    ///
    /// - Parameters:
    ///   - batch: the most records per request; with `batchBytes`, requests are cut by bytes.
    ///   - latency: added by the collector to every answer (a server that far away).
    ///   - concurrency: requests in flight.
    ///   - collectorLimit: the requests the collector handles at once (503 past it); the
    ///     default is 64, above any concurrency measured, so only the latency limits the worker.
    /// - Returns: the run; its note gives the concurrency reached and the collector's 503s.
    public func drainToCollector(
        batch: Int, batchBytes: Int? = nil, count: Int, directory: String, latency: Duration = .zero,
        concurrency: SyncConfiguration.Concurrency = .fixed(1), collectorLimit: Int = 64
    ) async throws -> Run {
        try await blocking { try fill(count: count, directory: directory) }
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.retainsRecords = false
        collectorConfiguration.faults.latency = latency
        collectorConfiguration.maxConcurrentRequests = collectorLimit
        let collector = Collector(configuration: collectorConfiguration)
        let port = try await collector.start()
        let log = try await blocking { try open(directory) }
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = batch
        configuration.maxBatchBytes = batchBytes ?? max(configuration.maxBatchBytes, batch * 1024)
        configuration.concurrency = concurrency
        // Overload answers carry Retry-After: 1; the worker's own backoff starts short.
        configuration.backoff = Backoff(base: .milliseconds(50), factor: 2, cap: .seconds(1))
        let worker = try SyncWorker(
            consumer: try log.consumer(named: "uploader"), url: URL(string: "http://127.0.0.1:\(port)/batch")!,
            configuration: configuration, logger: quietLogger)
        let start = monotonicNanos()
        let report = await worker.flush(retries: 1_000)
        let nanos = monotonicNanos() - start
        let stats = await worker.stats
        await worker.stop()
        let overloaded = collector.stats.overloaded
        await collector.stop()
        try await blocking { try log.close() }
        if let failure = report.failure { throw failure }
        guard report.records == count else {
            throw BenchError("the flush sent \(report.records) of \(count) events")
        }
        var run = Run(count: report.records, nanos: nanos)
        if case .adaptive = concurrency {
            run.note = "settled at \(stats.concurrency) in flight (peak \(stats.peakConcurrency)), \(overloaded) × 503"
        }
        return run
    }
}
