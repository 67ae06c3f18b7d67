extension Context {
    /// Issue #28's collector rows: events/s one reference collector ingests from 4 device logs
    /// drained at once (adaptive ≤ 16 requests each), storing them durably (`--log`: appended
    /// to its Spool log and synced before the 2xx, one `fdatasync` shared by the requests in
    /// flight) against appending them to an NDJSON file it never syncs (`--out`). Batches of
    /// 50 (the sync's default) and 500. Goal: `--log` costs at most 20% of `--out`'s rate.
    func collectorRows() async throws -> [Row] {
        let spool = self.spool
        let count = min(options.drainEvents, 40_000)
        var steps: [Step] = [], baselines: [Step] = []
        for batch in [50, 500] {
            steps.append(Step(key: "log \(batch)") {
                try await spool.ingestIntoCollector(store: .log, devices: 4, batch: batch, count: count, directory: $0)
            })
            baselines.append(Step(key: "out \(batch)") {
                try await spool.ingestIntoCollector(store: .out, devices: 4, batch: batch, count: count, directory: $0)
            })
        }
        progress("collector: \(count) events from 4 device logs per measurement")
        let best = try await alternate(steps, baselines)
        return [50, 500].map { batch in
            Row(group: "collector", scenario: "collector --log ← 4 devices, batches of \(batch), adaptive ≤ 16",
                spool: .events(best["log \(batch)"]!), baseline: "collector --out (NDJSON, no sync)",
                baselineFigure: .events(best["out \(batch)"]!), percent: true, goal: .atLeast(0.8))
        }
    }
}
