import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension Context {
    /// Issue #25's Pub/Sub rows: events/s published into the emulator (publishes of 1,000
    /// messages) by the sync worker, with 1 and adaptive (≤ 16) requests in flight, against a
    /// plain concurrent REST publisher of the same messages, 8 in flight (the emulator's own
    /// ceiling on this machine). Goal: adaptive ≥ 80% of the plain publisher.
    func pubSubRows() async throws -> [Row] {
        let spool = self.spool
        let emulator = try await PubSubEmulator.shared()
        let count = min(options.drainEvents, 50_000)
        let steps = [
            Step(key: "spool 1") { try await spool.drainToPubSub(count: count, directory: $0, emulator: emulator, concurrency: .fixed(1)) },
            Step(key: "spool adaptive") {
                try await spool.drainToPubSub(count: count, directory: $0, emulator: emulator, concurrency: .adaptive(max: 16))
            },
        ]
        let plain = [Step(key: "plain") { _ in try await spool.plainPublish(count: count, emulator: emulator, concurrency: 8) }]
        progress("pubsub: \(count) events into the emulator per measurement")
        let best = try await alternate(steps, plain)
        func figure(_ key: String) -> Figure { .events(best[key]!) }
        return [
            Row(group: "pubsub", scenario: "worker → Pub/Sub emulator, 1,000 per publish, 1 in flight", spool: figure("spool 1"),
                baseline: "plain REST publisher, 8 in flight", baselineFigure: figure("plain"), percent: true),
            Row(group: "pubsub", scenario: "worker → Pub/Sub emulator, 1,000 per publish, adaptive ≤ 16", spool: figure("spool adaptive"),
                baseline: "plain REST publisher, 8 in flight", baselineFigure: figure("plain"), percent: true, goal: .atLeast(0.8)),
        ]
    }
}
