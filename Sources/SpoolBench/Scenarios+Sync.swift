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
