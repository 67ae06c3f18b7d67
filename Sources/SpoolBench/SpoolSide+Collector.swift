import Foundation
import Spool
import SpoolCollector
import SpoolSync

extension SpoolSide {
    /// Where the reference collector puts what it accepts, for ``ingestIntoCollector(store:devices:batch:count:directory:)``.
    enum CollectorStore: Sendable {
        /// `--log`: appended to a Spool log, synced before the 2xx (group commit).
        case log
        /// `--out`: appended to an NDJSON file, never synced.
        case out
    }

    /// Issue #28's collector ingest: `devices` logs of `count / devices` events each (stored
    /// untimed) drained at once, one `SyncWorker` each (adaptive, up to 16 requests in flight,
    /// `batch` records per request), into one reference collector on 127.0.0.1 that keeps every
    /// record as `store` says. Timed from the first request to the last answer.
    ///
    /// - Returns: the run; its note gives the requests the collector accepted and its 503s.
    func ingestIntoCollector(store: CollectorStore, devices: Int, batch: Int, count: Int, directory: String) async throws -> Run {
        let perDevice = count / devices
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.retainsRecords = false
        collectorConfiguration.maxConcurrentRequests = 16 * devices
        switch store {
        case .log: collectorConfiguration.logDirectory = directory + "/collector"
        case .out: collectorConfiguration.outputPath = directory + "/collected.ndjson"
        }
        let logs = try await deviceLogs(devices, perDevice: perDevice, directory: directory)
        let collector = Collector(configuration: collectorConfiguration)
        let flushed: (start: UInt64, end: UInt64, reports: [FlushReport], peaks: [Int])
        do {
            flushed = try await flushAtOnce(logs, to: URL(string: "http://127.0.0.1:\(try await collector.start())/batch")!, batch: batch)
        } catch {
            await collector.stop()
            try await blocking { for log in logs { try log.close() } }
            throw error
        }
        let (nanos, reports) = (flushed.end - flushed.start, flushed.reports)
        let stats = collector.stats
        await collector.stop()
        try await blocking { for log in logs { try log.close() } }
        if let failure = reports.compactMap(\.failure).first { throw failure }
        let sent = reports.map(\.records).reduce(0, +)
        guard sent == perDevice * devices, stats.received == sent else {
            throw BenchError("the devices sent \(sent) of \(perDevice * devices) events, the collector received \(stats.received)")
        }
        var run = Run(count: sent, nanos: nanos)
        run.note = "\(stats.acceptedBatches) requests, \(stats.overloaded) × 503, at most \(flushed.peaks.map(String.init).joined(separator: "/")) in flight"
        return run
    }

    /// `devices` new logs of `perDevice` events each (stored untimed, synced), open.
    func deviceLogs(_ devices: Int, perDevice: Int, directory: String) async throws -> [EventLog] {
        try await blocking {
            try (0..<devices).map { index in
                try fill(count: perDevice, directory: directory + "/device\(index)")
                return try open(directory + "/device\(index)")
            }
        }
    }

    /// Drains every log of `logs` to `url` at once, one `SyncWorker` each (adaptive ≤ 16,
    /// `batch` records per request), then stops the workers.
    ///
    /// - Returns: when the first flush started and the last ended (its last answer), in
    ///   ``monotonicNanos()``, each worker's report and the most requests it had in flight.
    func flushAtOnce(_ logs: [EventLog], to url: URL, batch: Int) async throws -> (start: UInt64, end: UInt64, reports: [FlushReport], peaks: [Int]) {
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = batch
        configuration.maxBatchBytes = max(configuration.maxBatchBytes, batch * 1024)
        configuration.concurrency = .adaptive(max: 16)
        let workers = try logs.map { log in
            try SyncWorker(consumer: try log.consumer(named: "uploader"),
                           sink: HTTPSink(uploader: platformUploader(url: url), logID: log.id, configuration: configuration),
                           configuration: configuration, logger: quietLogger)
        }
        let start = monotonicNanos()
        let reports = await withTaskGroup(of: FlushReport.self) { group in
            for worker in workers { group.addTask { await worker.flush(retries: 1_000) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let end = monotonicNanos()
        var peaks = [Int]()
        for worker in workers {
            peaks.append(await worker.stats.peakInFlight)
            await worker.stop()
        }
        return (start, end, reports, peaks)
    }
}
