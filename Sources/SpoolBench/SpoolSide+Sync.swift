import Foundation
import Spool
import SpoolCollector
import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

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
    ///   - faults: more faults for the collector to inject (slow answers, 503s); its latency
    ///     is `latency`.
    ///   - backoff: the worker's backoff; nil for the library's default. The default is 50 ms
    ///     doubling to 1 s.
    /// - Returns: the run; its note gives the concurrency reached and the collector's 503s.
    package func drainToCollector(
        batch: Int, batchBytes: Int? = nil, count: Int, directory: String, latency: Duration = .zero,
        concurrency: SyncConfiguration.Concurrency = .fixed(1), collectorLimit: Int = 64,
        faults: FaultConfiguration = .none, backoff: Backoff? = Backoff(base: .milliseconds(50), factor: 2, cap: .seconds(1))
    ) async throws -> Run {
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.retainsRecords = false
        collectorConfiguration.faults = faults
        collectorConfiguration.faults.latency = latency
        collectorConfiguration.maxConcurrentRequests = collectorLimit
        let collector = Collector(configuration: collectorConfiguration)
        let port = try await collector.start()
        do {
            var run = try await drain(
                to: URL(string: "http://127.0.0.1:\(port)/batch")!, batch: batch, batchBytes: batchBytes, count: count,
                directory: directory, concurrency: concurrency, backoff: backoff)
            let overloaded = collector.stats.overloaded
            if case .adaptive = concurrency { run.note = (run.note ?? "") + ", \(overloaded) × 503" }
            await collector.stop()
            return run
        } catch {
            await collector.stop()
            throw error
        }
    }

    /// ``drainToCollector(batch:batchBytes:count:directory:latency:concurrency:collectorLimit:faults:backoff:)``
    /// against a single-threaded server whose accept queue holds 5 connections (Python's
    /// `http.server`), answering each request after 1 ms of work.
    package func drainToBacklogServer(batch: Int, count: Int, directory: String, concurrency: SyncConfiguration.Concurrency) async throws -> Run {
        let server = try BacklogServer()
        do {
            let run = try await drain(
                to: URL(string: "http://127.0.0.1:\(server.port)/batch")!, batch: batch, batchBytes: nil, count: count,
                directory: directory, concurrency: concurrency, backoff: nil)
            await server.stop()
            return run
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Stores `count` events (untimed) and times one flush of them to `url`.
    private func drain(
        to url: URL, batch: Int, batchBytes: Int?, count: Int, directory: String,
        concurrency: SyncConfiguration.Concurrency, backoff: Backoff?
    ) async throws -> Run {
        try await drain(batch: batch, batchBytes: batchBytes, count: count, directory: directory, concurrency: concurrency,
                        backoff: backoff) { log, configuration in
            HTTPSink(uploader: platformUploader(url: url), logID: log, configuration: configuration)
        }
    }

    /// Stores `count` events (untimed) and times one flush of them into the sink `sink` makes.
    func drain(
        batch: Int, batchBytes: Int?, count: Int, directory: String, concurrency: SyncConfiguration.Concurrency,
        backoff: Backoff?, sink: (LogID, SyncConfiguration) throws -> any SyncSink
    ) async throws -> Run {
        try await blocking { try fill(count: count, directory: directory) }
        let log = try await blocking { try open(directory) }
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = batch
        configuration.maxBatchBytes = batchBytes ?? max(configuration.maxBatchBytes, batch * 1024)
        configuration.concurrency = concurrency
        if let backoff { configuration.backoff = backoff }
        let worker = try SyncWorker(
            consumer: try log.consumer(named: "uploader"), sink: try sink(log.id, configuration), configuration: configuration,
            logger: quietLogger)
        let start = monotonicNanos()
        let report = await worker.flush(retries: 1_000)
        let nanos = monotonicNanos() - start
        let stats = await worker.stats
        await worker.stop()
        try await blocking { try log.close() }
        if let failure = report.failure { throw failure }
        guard report.records == count else {
            throw BenchError("the flush sent \(report.records) of \(count) events")
        }
        var run = Run(count: report.records, nanos: nanos)
        if case .adaptive = concurrency {
            run.note = "settled at \(stats.concurrency) in flight (peak \(stats.peakInFlight))"
        }
        if stats.retries > 0 { run.note = (run.note.map { $0 + ", " } ?? "") + "\(stats.retries) retried" }
        if stats.hedges > 0 { run.note = (run.note.map { $0 + ", " } ?? "") + "\(stats.hedges) hedged" }
        return run
    }
}
