import SpoolCollector
import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension Context {
    /// Issue #26's rows: the sliding window against slow outliers, the fast start, the faults
    /// demo's failure rate, and a server whose full accept queue drops connections.
    ///
    /// - (a) and (b): 512 KiB batches, adaptive ≤ ``BenchOptions/windowAdaptiveMax`` (32, as
    ///   for every adaptive row here), 50 ms away, steady and with 2% of the answers 1 s late;
    ///   goal (b) ≥ 60% of (a).
    /// - (c): 100,000 records at 50 ms with 512 KiB batches, the fast start included; goal
    ///   ≥ 100,000 events/s. The default batch of 50 at 50 ms: goal ≥ 20,000 events/s (13,100
    ///   with rounds).
    /// - 20% of the answers 503 without `Retry-After`, on no latency, with 1 and adaptive in
    ///   flight and the default backoff, against the fault-free rate.
    /// - A single-threaded server with an accept queue of 5 (Python's `http.server`): adaptive
    ///   and 16 in flight against one; goal adaptive ≥ 90%.
    /// - Python's threaded server with the same queue (``ThreadedServer``: HTTP/1.0, a thread
    ///   per connection): adaptive against one in flight; goal ≥ 90%.
    func syncWindowRows() async throws -> [Row] {
        let spool = self.spool
        let most = options.windowAdaptiveMax
        let adaptive = SyncConfiguration.Concurrency.adaptive(max: most)
        let large = 512 * 1024
        let outlierCount = options.drainEvents * 3
        let slow = { var faults = FaultConfiguration(); faults.slowRate = 0.02; return faults }()
        let failing = { var faults = FaultConfiguration(); faults.failureRate = 0.2; return faults }()
        let steps: [Step] = [
            Step(key: "a") { try await spool.drainToCollector(
                batch: 100_000, batchBytes: large, count: outlierCount, directory: $0, latency: .milliseconds(50), concurrency: adaptive) },
            Step(key: "b") { try await spool.drainToCollector(
                batch: 100_000, batchBytes: large, count: outlierCount, directory: $0, latency: .milliseconds(50), concurrency: adaptive,
                faults: slow) },
            Step(key: "c") { try await spool.drainToCollector(
                batch: 100_000, batchBytes: large, count: options.drainEvents, directory: $0, latency: .milliseconds(50),
                concurrency: adaptive) },
            Step(key: "batch 50") { try await spool.drainToCollector(
                batch: 50, count: min(options.drainEvents, 40_000), directory: $0, latency: .milliseconds(50), concurrency: adaptive) },
            Step(key: "clean 1") { try await spool.drainToCollector(
                batch: 50, count: min(options.drainEvents, 20_000), directory: $0, backoff: nil) },
            Step(key: "503 1") { try await spool.drainToCollector(
                batch: 50, count: min(options.drainEvents, 20_000), directory: $0, faults: failing, backoff: nil) },
            Step(key: "clean adaptive") { try await spool.drainToCollector(
                batch: 50, count: min(options.drainEvents, 20_000), directory: $0, concurrency: adaptive, backoff: nil) },
            Step(key: "503 adaptive") { try await spool.drainToCollector(
                batch: 50, count: min(options.drainEvents, 20_000), directory: $0, concurrency: adaptive, faults: failing, backoff: nil) },
            Step(key: "queue 1") { try await spool.drainToBacklogServer(
                batch: 50, count: min(options.drainEvents, 60_000), directory: $0, concurrency: .fixed(1)) },
            Step(key: "queue adaptive") { try await spool.drainToBacklogServer(
                batch: 50, count: min(options.drainEvents, 60_000), directory: $0, concurrency: adaptive) },
            Step(key: "queue 16") { try await spool.drainToBacklogServer(
                batch: 50, count: min(options.drainEvents, 60_000), directory: $0, concurrency: .fixed(16)) },
            Step(key: "threaded 1") { try await spool.drainToThreadedServer(
                batch: 50, count: min(options.drainEvents, 60_000), directory: $0, concurrency: .fixed(1)) },
            Step(key: "threaded adaptive") { try await spool.drainToThreadedServer(
                batch: 50, count: min(options.drainEvents, 60_000), directory: $0, concurrency: adaptive) },
        ]
        progress("sync window: \(steps.count) drains (slow outliers, fast start, 503s, a full accept queue, a threaded server)")
        let best = try await alternate(steps, [])
        func figure(_ key: String) -> Figure { .events(best[key]!) }
        return [
            Row(group: "sync", scenario: "(b) +50 ms, 2% of answers +1 s, 512 KiB batches, adaptive ≤ \(most)", spool: figure("b"),
                baseline: "(a) the same, steady", baselineFigure: figure("a"), percent: true, goal: .atLeast(0.6)),
            Row(group: "sync", scenario: "(c) \(options.drainEvents) records, +50 ms, 512 KiB batches, adaptive ≤ \(most), fast start included",
                spool: figure("c"), baseline: "issue #26's goal", baselineFigure: Figure(100_000, "events/s"), goal: .atLeast(1)),
            Row(group: "sync", scenario: "+50 ms, batch 50, adaptive ≤ \(most)", spool: figure("batch 50"),
                baseline: "issue #26's goal", baselineFigure: Figure(20_000, "events/s"), goal: .atLeast(1)),
            Row(group: "sync", scenario: "20% 503 (no Retry-After), batch 50, 1 in flight", spool: figure("503 1"),
                baseline: "no faults, 1 in flight", baselineFigure: figure("clean 1"), percent: true),
            Row(group: "sync", scenario: "20% 503 (no Retry-After), batch 50, adaptive ≤ \(most)", spool: figure("503 adaptive"),
                baseline: "no faults, adaptive ≤ \(most)", baselineFigure: figure("clean adaptive"), percent: true),
            Row(group: "sync", scenario: "accept queue of 5, batch 50, adaptive ≤ \(most)", spool: figure("queue adaptive"),
                baseline: "1 in flight", baselineFigure: figure("queue 1"), percent: true, goal: .atLeast(0.9)),
            Row(group: "sync", scenario: "accept queue of 5, batch 50, 16 in flight", spool: figure("queue 16"),
                baseline: "1 in flight", baselineFigure: figure("queue 1"), percent: true),
            Row(group: "sync", scenario: "threaded server, accept queue of 5 (Python's ThreadingHTTPServer), batch 50, adaptive ≤ \(most)",
                spool: figure("threaded adaptive"), baseline: "1 in flight", baselineFigure: figure("threaded 1"), percent: true,
                goal: .atLeast(0.9)),
        ]
    }
}

extension SpoolSide {
    /// Stores `count` events (untimed) and times one flush of them, in batches of `batch`, to
    /// Python's threaded server (``ThreadedServer``), started for the drain and stopped after.
    fileprivate func drainToThreadedServer(
        batch: Int, count: Int, directory: String, concurrency: SyncConfiguration.Concurrency
    ) async throws -> Run {
        let server = try await ThreadedServer.start()
        do {
            let run = try await drain(batch: batch, batchBytes: nil, count: count, directory: directory, concurrency: concurrency,
                                      backoff: nil) { log, configuration in
                HTTPSink(uploader: platformUploader(url: server.url), logID: log, configuration: configuration)
            }
            await server.stop()
            return run
        } catch {
            await server.stop()
            throw error
        }
    }
}
