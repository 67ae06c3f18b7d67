import Foundation
import Spool

extension Context {
    /// Append throughput per durability level and producer count, against SQLite's
    /// one-event and 100-event transactions and against the disk's `fdatasync` rate (measured
    /// again in every round, alternating like the rest, and kept in `hardware` at its best).
    func appendRows(hardware: inout HardwareFigures) async throws -> [Row] {
        let budget = options.budget
        let spool = self.spool
        let events = self.events
        // `synced` alone (for profiling group commit): only the synced rows and their baselines.
        let all = options.runs("append")
        var spoolSteps = [Step]()
        for (durability, producers) in all ? [(Durability.buffered, 1), (.buffered, 4), (.written, 1), (.written, 4)] : [] {
            spoolSteps.append(Step(key: "Spool \(durability) ×\(producers)") { directory in
                try await blocking { try spool.append(durability, producers: producers, directory: directory, budget: budget) }
            })
        }
        let window = options.pipelineWindow
        if all {
            spoolSteps.append(Step(key: "Spool written pipelined") { directory in
                try await spool.appendPipelined(window: window, directory: directory, budget: budget)
            })
        }
        for producers in options.syncedProducers {
            spoolSteps.append(Step(key: "Spool synced ×\(producers)") { directory in
                try await spool.appendConcurrently(.synced, producers: producers, directory: directory, budget: budget)
            })
        }
        let beside = options.syncedProducers.max() ?? 64
        spoolSteps.append(Step(key: "Spool written ×1 beside synced ×\(beside)") { directory in
            try await spool.appendWrittenBesideSynced(synced: beside, directory: directory, budget: budget)
        })
        for rate in options.openLoopRates {
            spoolSteps.append(Step(key: "Spool synced open loop \(format(rate))/s") { directory in
                try await spool.appendSyncedOpenLoop(rate: rate, directory: directory, budget: budget)
            })
        }
        let syncBudget = Budget(events: budget.events, seconds: min(2, budget.seconds))
        var baselineSteps = [Step(key: "hw fdatasync") { directory in
            try await blocking { try fdatasyncRate(path: directory + "/fdatasync.bin", budget: syncBudget) }
        }, Step(key: "hw fdatasync preallocated") { directory in
            try await blocking { try fdatasyncRate(path: directory + "/fdatasync.bin", budget: syncBudget, preallocated: true) }
        }]
        // The parts of one serial group-commit cycle that no log design can avoid, measured
        // alone: zstd -1 of one group's bytes, and the runtime's round trip of the group's tasks.
        let data = events.concatenated()
        let eventBytes = Int(events.meanSize.rounded())
        for producers in options.syncedProducers where producers > 1 {
            baselineSteps.append(Step(key: "hw zstd -1 group ×\(producers)") { _ in
                try await blocking { zstdCompressRun(data, chunk: producers * eventBytes, level: 1) }
            })
            baselineSteps.append(Step(key: "runtime round trip ×\(producers)") { _ in
                await groupRoundTrip(producers: producers, budget: budget)
            })
        }
        if let baseline {
            for mode in BaselineAppend.allCases where all || mode == .full {
                baselineSteps.append(Step(key: "\(baseline.name) \(mode.label)") { directory in
                    try await blocking { try baseline.append(mode, events: events, directory: directory, budget: budget) }
                })
            }
        }
        progress("append: \(spoolSteps.count) Spool and \(baselineSteps.count) baseline measurements")
        let best = try await alternate(spoolSteps, baselineSteps)

        func spoolFigure(_ key: String) -> Figure { .events(best["Spool " + key]!) }
        func base(_ mode: BaselineAppend) -> (String, Figure)? {
            guard let baseline, let run = best["\(baseline.name) \(mode.label)"] else { return nil }
            return ("\(baseline.name) \(mode.label)", .events(run))
        }
        var rows = [Row]()
        func add(_ key: String, _ mode: BaselineAppend, goal: Goal? = nil) {
            guard let (name, figure) = base(mode) else { return }
            rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key), baseline: name, baselineFigure: figure, goal: goal))
        }
        if all {
            for producers in [1, 4] {
                let key = "buffered ×\(producers)"
                if baseline == nil { rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key))) }
                add(key, .offBatch100)
            }
            // Four threads appending buffered outrun one core's sealing: blocks are sealed on
            // every core (`Configuration.sealingThreads`).
            rows.append(Row(group: "append", scenario: "buffered ×4", spool: spoolFigure("buffered ×4"),
                            baseline: "Spool buffered ×1", baselineFigure: spoolFigure("buffered ×1"),
                            goal: ProcessInfo.processInfo.activeProcessorCount >= 2 ? .atLeast(1.5) : nil))
            for producers in [1, 4] {
                let key = "written ×\(producers)"
                if baseline == nil { rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key))) }
                add(key, .normal)
                add(key, .off)
            }
            if baseline == nil { rows.append(Row(group: "append", scenario: "written pipelined", spool: spoolFigure("written pipelined"))) }
            add("written pipelined", .off, goal: .atLeast(12))
            add("written pipelined", .offBatch100, goal: .atLeast(2.5))
        }
        if let sync = best["hw fdatasync"], sync.rate > hardware.fdatasyncPerSecond {
            hardware.fdatasyncPerSecond = sync.rate
            hardware.fdatasyncLatency = sync.latencies
        }
        let fdatasync = Figure(hardware.fdatasyncPerSecond, "events/s", latency: hardware.fdatasyncLatency)
        // The ceiling of N synced producers: N events per fdatasync of allocated blocks, and
        // nothing else in the cycle (no compression, no wake-ups). The serial ceiling adds what
        // every cycle of a gathering writer also does: compress the group, resume its tasks.
        let overwrite = best["hw fdatasync preallocated"]!
        for producers in options.syncedProducers {
            let key = "synced ×\(producers)"
            add(key, .full, goal: producers == 64 ? .atLeast(50) : nil)
            rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key),
                            baseline: "hw: 256 B append+fdatasync", baselineFigure: fdatasync))
            rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key),
                            baseline: "hw ceiling: \(producers) × overwrite+fdatasync rate",
                            baselineFigure: Figure(Double(producers) * overwrite.rate, "events/s"), percent: true))
            if let ceiling = serialCeiling(producers: producers, groupBytes: producers * eventBytes, best: best, overwrite: overwrite) {
                rows.append(Row(group: "append", scenario: key, spool: spoolFigure(key),
                                baseline: "serial ceiling: fdatasync + zstd + \(producers) tasks' round trip",
                                baselineFigure: Figure(ceiling, "events/s"), percent: true))
                if let (name, full) = base(.full) {
                    progress("  the serial ceiling ×\(producers) is \(format(ceiling / full.value))× \(name)")
                }
            }
        }
        // A `written` caller beside a synced load is answered while each group syncs, not
        // after: faster than one append per fdatasync.
        let besideKey = "written ×1 beside synced ×\(beside)"
        rows.append(Row(group: "append", scenario: besideKey, spool: spoolFigure(besideKey),
                        baseline: "hw: 256 B append+fdatasync", baselineFigure: fdatasync))
        // Synced arrivals on a clock: what a caller waits, against one append + fdatasync.
        if let sync = hardware.fdatasyncLatency {
            for rate in options.openLoopRates {
                let run = best["Spool synced open loop \(format(rate))/s"]!
                guard let latency = run.latencies else { continue }
                // The rate done goes in the note: a row's scenario is its key against a baseline.
                let done = (run.note.map { $0 + ", " } ?? "") + "\(format(run.rate)) events/s done"
                rows.append(Row(group: "append", scenario: "synced, open loop at \(format(rate))/s, p50",
                                spool: Figure(latency.p50, "µs", latency: latency, note: done),
                                baseline: "hw: 256 B append+fdatasync, p50", baselineFigure: Figure(sync.p50, "µs", latency: sync)))
                // No latencies here: the p50 row's already list them in the latency table.
                rows.append(Row(group: "append", scenario: "synced, open loop at \(format(rate))/s, p99",
                                spool: Figure(latency.p99, "µs"),
                                baseline: "hw: 256 B append+fdatasync, p99", baselineFigure: Figure(sync.p99, "µs")))
            }
        }
        return rows
    }

    /// The most events/s a serial group-commit cycle of `producers` can reach here (the
    /// shortest cycle, as a rate): one overwrite `fdatasync`, zstd -1 of the group's
    /// `groupBytes`, and the group's task round trip, each measured alone in this run, one
    /// after the other with nothing else (no `pwrite`, checksum, copy, bookkeeping or
    /// scheduling between them). Nil without them.
    private func serialCeiling(producers: Int, groupBytes: Int, best: [String: Run], overwrite: Run) -> Double? {
        guard let zstd = best["hw zstd -1 group ×\(producers)"], let trip = best["runtime round trip ×\(producers)"] else { return nil }
        let sync = 1 / overwrite.rate
        let compress = Double(groupBytes) / zstd.rate
        let resume = Double(producers) / trip.rate
        progress("  serial cycle ×\(producers) at the least: fdatasync \(format(sync * 1e6)) µs + zstd \(format(compress * 1e6)) µs"
            + " + round trip \(format(resume * 1e6)) µs = \(format((sync + compress + resume) * 1e6)) µs a cycle")
        return Double(producers) / (sync + compress + resume)
    }

    /// Block sealing (compress, checksum, write) through the public append path, against
    /// raw `ZSTD_compress -1` on the same bytes in 64 KiB chunks, one pass each, alternating.
    func sealRows(hardware: HardwareFigures) async throws -> [Row] {
        let spool = self.spool
        let budget = Budget(events: events.count, seconds: options.seconds * 4)
        let data = events.concatenated()
        let oneLane = {
            var side = spool
            side.configuration.sealingThreads = 1
            return side
        }()
        let lanes = spool.configuration.sealingThreads
        let best = try await alternate([Step(key: "Spool seal") { directory in
            try await blocking { try spool.seal(directory: directory, budget: budget) }
        }, Step(key: "Spool seal, one lane") { directory in
            try await blocking { try oneLane.seal(directory: directory, budget: budget) }
        }], [Step(key: "hw zstd -1") { _ in
            try await blocking { zstdCompressRun(data, chunk: 64 * 1024, level: 1) }
        }])
        let run = best["Spool seal"]!
        // The same single pass over the same bytes, alternating: not the warm, repeated
        // figure of the header.
        let raw = best["hw zstd -1"]!
        let serial = best["Spool seal, one lane"]!
        let cores = ProcessInfo.processInfo.activeProcessorCount
        return [
            Row(group: "seal", scenario: "append buffered ×1 (64 KiB blocks), \(lanes) sealing lanes on \(cores) cores",
                spool: Figure(run.rate / 1e6, "MB/s"),
                baseline: "hw: raw zstd -1 on one core, 64 KiB, one pass", baselineFigure: Figure(raw.rate / 1e6, "MB/s"),
                percent: true, goal: .atLeast(cores >= 2 ? 1.5 : 0.70)),
            Row(group: "seal", scenario: "append buffered ×1 (64 KiB blocks), \(lanes) sealing lanes",
                spool: Figure(run.rate / 1e6, "MB/s"),
                baseline: "Spool with sealingThreads 1", baselineFigure: Figure(serial.rate / 1e6, "MB/s"), percent: true),
            Row(group: "seal", scenario: "append buffered ×1 (64 KiB blocks)", spool: Figure(run.rate / 1e6, "MB/s"),
                baseline: "hw: sequential write+fdatasync", baselineFigure: Figure(hardware.sequentialWriteMBps, "MB/s"),
                percent: true),
        ]
    }
}
