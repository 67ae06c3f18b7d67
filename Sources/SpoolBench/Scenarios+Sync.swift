import SpoolSync

extension Context {
    /// Draining to the reference collector over HTTP with the sync worker, against the local
    /// drains of `drainRows`: Spool's own (the cost of HTTP) and SQLite's FULL one (which
    /// does no network at all: a conservative comparison).
    func syncRows(drainRows: [Row]) async throws -> [Row] {
        let spool = self.spool
        let count = options.drainEvents
        let batches = [50, 500]
        let steps = batches.map { batch in
            Step(key: "Spool sync \(batch)") { directory in
                try await spool.drainToCollector(batch: batch, count: count, directory: directory)
            }
        }
        progress("sync: \(count) events to the collector per measurement")
        let best = try await alternate(steps, [])
        var rows = [Row]()
        for batch in batches {
            let figure = Figure.events(best["Spool sync \(batch)"]!)
            let scenario = "worker → collector over HTTP, batch \(batch)"
            let local = drainRows.filter { $0.scenario == "read+encode+commit(durable), batch \(batch)" }
            if let own = local.first {
                rows.append(Row(group: "sync", scenario: scenario, spool: figure,
                                baseline: "Spool local drain, batch \(batch)", baselineFigure: own.spool))
            }
            if let sqlite = local.first(where: { $0.baseline?.contains("FULL") == true }) {
                rows.append(Row(group: "sync", scenario: scenario, spool: figure,
                                baseline: (sqlite.baseline ?? "") + " (no HTTP)", baselineFigure: sqlite.baselineFigure))
            }
        }
        return rows
    }
}

extension Context {
    /// A request's shape: records per request, cut by count or by bytes.
    struct BatchShape {
        var name: String
        var count: Int
        var bytes: Int?
        /// About how many events one request carries.
        var eventsPerRequest: Int
    }

    /// Draining through a collector 0, 10 and 50 ms away, with 1, 8 and adaptive requests in
    /// flight, for the default batch of 50 and for 512 KiB batches. Each figure is compared, in
    /// this run, with one request in flight on the same path (the speedup), and the 50 ms figures
    /// with the same concurrency on no latency (the share of the local rate the network keeps).
    /// Goals (issue #18): at 50 ms, ten times one request in flight with batch 50, and with
    /// 512 KiB batches ten times what one request in flight made of batches of 500 (≥ 100,000
    /// events/s where it made 9,600).
    /// Adaptive also runs against a collector that takes only 8 requests at once and answers
    /// 503 past that: the note says where it settled.
    func syncLatencyRows() async throws -> [Row] {
        let spool = self.spool
        let latencies = [0, 10, 50]
        // The json envelope adds about 70 bytes to each event.
        let perRequest = Int(Double(512 * 1024) / (events.meanSize + 70))
        let shapes = [
            BatchShape(name: "batch 50", count: 50, bytes: nil, eventsPerRequest: 50),
            BatchShape(name: "512 KiB batches", count: 100_000, bytes: 512 * 1024, eventsPerRequest: perRequest),
        ]
        let concurrencies: [(name: String, value: SyncConfiguration.Concurrency)] = [
            ("1 in flight", .fixed(1)), ("8 in flight", .fixed(8)), ("adaptive ≤ 16", .adaptive(max: 16)),
        ]
        func key(_ latency: Int, _ shape: BatchShape, _ concurrency: String, limit: Int = 64) -> String {
            "sync +\(latency) ms, \(shape.name), \(concurrency)" + (limit < 64 ? ", collector takes \(limit)" : "")
        }
        var steps = [Step]()
        for latency in latencies {
            for shape in shapes {
                var cases = concurrencies.map { ($0.name, $0.value, 64) }
                if latency == 50 { cases.append(("adaptive ≤ 16", .adaptive(max: 16), 8)) }
                for (name, concurrency, limit) in cases {
                    // About two seconds of work at the best rate the path allows, within --drain-events.
                    let ceiling = latency == 0 ? Double.infinity
                        : Double(shape.eventsPerRequest * concurrency.maximum) / (Double(latency) / 1000)
                    let count = min(options.drainEvents, max(500, Int(min(ceiling * 2, 1e9))))
                    steps.append(Step(key: key(latency, shape, name, limit: limit)) { directory in
                        try await spool.drainToCollector(
                            batch: shape.count, batchBytes: shape.bytes, count: count, directory: directory,
                            latency: .milliseconds(latency), concurrency: concurrency, collectorLimit: limit)
                    })
                }
            }
        }
        // What one request in flight made of batches of 500 at 50 ms before requests were
        // pipelined (9,600 events/s): the 512 KiB batches' goal is ten times that.
        let before = BatchShape(name: "batch 500", count: 500, bytes: nil, eventsPerRequest: 500)
        steps.append(Step(key: key(50, before, "1 in flight")) { directory in
            try await spool.drainToCollector(
                batch: 500, count: min(options.drainEvents, 20_000), directory: directory, latency: .milliseconds(50))
        })
        progress("sync over latency: \(steps.count) drains to a collector 0, 10 and 50 ms away")
        let best = try await alternate(steps, [])
        var rows = [Row]()
        for latency in latencies {
            for shape in shapes {
                let serial = best[key(latency, shape, "1 in flight")]!
                for (name, _) in concurrencies.dropFirst() {
                    let run = best[key(latency, shape, name)]!
                    if latency == 50 && shape.bytes != nil {
                        rows.append(Row(
                            group: "sync", scenario: "+50 ms, \(shape.name), \(name)", spool: .events(run),
                            baseline: "1 in flight, batch 500", baselineFigure: .events(best[key(50, before, "1 in flight")]!),
                            goal: .atLeast(10)))
                    }
                    rows.append(Row(
                        group: "sync", scenario: "+\(latency) ms, \(shape.name), \(name)", spool: .events(run),
                        baseline: "1 in flight", baselineFigure: .events(serial),
                        // 8 in flight cannot pass 8× one; the goal is the default's (adaptive).
                        goal: latency == 50 && shape.bytes == nil && name.hasPrefix("adaptive") ? .atLeast(10) : nil))
                    if latency == 50 {
                        rows.append(Row(
                            group: "sync", scenario: "+50 ms, \(shape.name), \(name)", spool: .events(run),
                            baseline: "the same on no latency", baselineFigure: .events(best[key(0, shape, name)]!),
                            percent: true, goal: .atLeast(0.5)))
                    }
                }
                if latency == 50 {
                    let limited = best[key(50, shape, "adaptive ≤ 16", limit: 8)]!
                    rows.append(Row(
                        group: "sync", scenario: "+50 ms, \(shape.name), adaptive ≤ 16, collector takes 8", spool: .events(limited),
                        baseline: "adaptive, collector takes 64", baselineFigure: .events(best[key(50, shape, "adaptive ≤ 16")]!),
                        percent: true))
                }
            }
        }
        return rows
    }
}
