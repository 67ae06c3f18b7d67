extension Report {
    /// The report of `passes`: each row's figures and ratio the median of the runs', with
    /// their ``Estimate``s; latencies pooled; the hardware's ceilings the median of the runs'.
    init(run: RunInfo, passes: [Pass]) {
        self.run = run
        hardware = passes.isEmpty ? nil : HardwareFigures(medianOf: passes.map(\.hardware))
        var keys = [String]()
        var runs = [String: [Row]]()
        for row in passes.flatMap(\.rows) {
            if runs[row.key] == nil { keys.append(row.key) }
            runs[row.key, default: []].append(row)
        }
        rows = keys.map { Row(mergingRuns: runs[$0]!) }
    }

    /// Sets every row's ``Row/change`` against the same row of `saved` (a report loaded from
    /// the baseline `name`), and says whether the two ran in different environments.
    package mutating func compare(with saved: Report, name: String) {
        let before = Dictionary(saved.rows.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        for index in rows.indices {
            guard let old = before[rows[index].key] else { continue }
            rows[index].change = Change(from: old.spool.samples, to: rows[index].spool.samples,
                                        higherIsBetter: rows[index].spool.higherIsBetter)
        }
        comparedWith = Comparison(
            name: name, environmentDifferences: run.environment.differences(from: saved.run.environment),
            loadDifference: Load.difference(run.load, from: saved.run.load, cores: run.environment.cores))
    }

    /// The rows that ``Verdict/regressed`` by at least `fraction` (0.10 for 10%) against the
    /// baseline compared with.
    package func regressions(beyond fraction: Double) -> [Row] {
        rows.filter { row in
            guard let change = row.change, change.verdict == .regressed else { return false }
            return abs(change.relative) >= fraction
        }
    }
}

extension Row {
    /// What identifies a row across runs and against a saved baseline.
    var key: String { [group, scenario, baseline ?? ""].joined(separator: " | ") }

    /// The first run's row with the figures and the ratio of all `runs` (at least one).
    init(mergingRuns runs: [Row]) {
        self = runs[0]
        spool = Figure(mergingRuns: runs.map(\.spool))
        let baselines = runs.compactMap(\.baselineFigure)
        if !baselines.isEmpty { baselineFigure = Figure(mergingRuns: baselines) }
        let ratios = runs.compactMap(\.ratio)
        if !ratios.isEmpty {
            let estimate = Estimate(ratios)
            ratio = estimate.median
            ratioEstimate = estimate
            goalMet = goal?.isMet(by: estimate.median)
        }
    }
}

extension Figure {
    /// The first run's figure with the median of all `runs`' values (at least one), their
    /// estimate, and their latencies pooled.
    init(mergingRuns runs: [Figure]) {
        self = runs[0]
        let estimate = Estimate(runs.map(\.value))
        value = estimate.median
        self.estimate = estimate
        latency = Latencies.merged(runs.compactMap(\.latency))
    }

    /// The runs' values (the value alone when there is no estimate).
    var samples: [Double] { estimate?.samples ?? [value] }
}

extension HardwareFigures {
    /// Each figure the median of `runs`' (at least one); the `fdatasync` latencies pooled.
    init(medianOf runs: [HardwareFigures]) {
        func median(_ field: KeyPath<HardwareFigures, Double>) -> Double { Estimate.median(runs.map { $0[keyPath: field] }) }
        self.init(zstdCompressMBps: median(\.zstdCompressMBps), zstdRatio: median(\.zstdRatio),
                  zstdDecompressMBps: median(\.zstdDecompressMBps), sequentialWriteMBps: median(\.sequentialWriteMBps),
                  fdatasyncPerSecond: median(\.fdatasyncPerSecond),
                  fdatasyncLatency: Latencies.merged(runs.compactMap(\.fdatasyncLatency)))
    }
}
