import Foundation
import Spool

/// Runs every scenario — Spool, its baseline when one is given, and the hardware
/// ceilings — on the same generated events in one process, alternating sides, and
/// collects a ``Report``.
///
/// Shared by `spool bench` (no baseline) and Benchmarks' `compare` (SQLite).
package struct BenchRunner: Sendable {
    package var options: BenchOptions
    package var baseline: (any Baseline)?
    /// Receives one line per finished measurement (the default prints to standard error).
    package var progress: @Sendable (String) -> Void

    package init(options: BenchOptions, baseline: (any Baseline)? = nil,
                progress: @escaping @Sendable (String) -> Void = { line in
                    FileHandle.standardError.write(Data((line + "\n").utf8))
                }) {
        self.options = options
        self.baseline = baseline
        self.progress = progress
    }

    /// Runs everything ``BenchOptions/runs`` times (after a warm-up run when
    /// ``BenchOptions/warmUp``) and returns the report: every figure the median of its runs,
    /// with its interval. Removes its scratch directories.
    package func run() async throws -> Report {
        let loadBefore = loadAverage()
        if let warning = Self.buildWarning { progress(warning) }
        let scratch = try Scratch(root: options.directory.map { $0 + "/spool-bench-\(getpid())" })
        defer { scratch.removeAll() }
        let root = scratch.root
        let environment = try await blocking { Environment.current(directory: root) }
        var generator = EventGenerator()
        let events = generator.events(options.events)
        progress("generated \(events.count) events, \(format(events.meanSize)) B mean")
        if options.warmUp {
            progress("warm-up run (thrown away)")
            var warmUp = BenchOptions.quick
            warmUp.groups = options.groups
            warmUp.postgres = options.postgres
            warmUp.appendProbeArguments = options.appendProbeArguments
            warmUp.followProbeArguments = options.followProbeArguments
            _ = try await pass(warmUp, events: EventSet(events: Array(events.events.prefix(warmUp.events))), scratch: scratch)
        }
        var passes = [Pass]()
        var load = Load(samples: [])
        for index in 0..<options.runs {
            progress("run \(index + 1) of \(options.runs)")
            load.sample()
            passes.append(try await pass(options, events: events, scratch: scratch))
        }
        load.sample()
        let info = RunInfo(
            events: events.count, meanEventBytes: events.meanSize, directory: scratch.root,
            loadBefore: loadBefore, loadAfter: loadAverage(), load: load, runs: options.runs, warmUp: options.warmUp,
            secondsPerMeasurement: options.seconds, baseline: baseline?.name, environment: environment,
            note: Self.buildWarning ?? "")
        return Report(run: info, passes: passes)
    }

    /// One run of every scenario: the hardware's figures and the rows.
    private func pass(_ options: BenchOptions, events: EventSet, scratch: Scratch) async throws -> Pass {
        let context = Context(options: options, baseline: baseline, scratch: scratch,
                              spool: SpoolSide(events: events, configuration: options.spoolConfiguration), progress: progress)
        var hardware = try await blocking {
            try measureHardware(events: events, directory: try scratch.fresh("hardware"),
                                writeBytes: options.sequentialBytes,
                                syncBudget: Budget(events: options.events, seconds: min(2, options.seconds)))
        }
        progress("hardware: zstd -1 \(format(hardware.zstdCompressMBps)) MB/s, write \(format(hardware.sequentialWriteMBps)) MB/s, "
            + "fdatasync \(format(hardware.fdatasyncPerSecond))/s")

        var rows = [Row]()
        if options.runs("append") || options.runs("synced") { rows += try await context.appendRows(hardware: &hardware) }
        if options.runs("seal") { rows += try await context.sealRows(hardware: hardware) }
        let drains = options.runs("drain") ? try await context.drainRows() : []
        rows += drains
        if options.runs("sync") { rows += try await context.syncRows(drainRows: drains) }
        if options.runs("sync") || options.runs("sync-latency") { rows += try await context.syncLatencyRows() }
        if options.runs("sync") || options.runs("sync-window") { rows += try await context.syncWindowRows() }
        // Only when asked: it starts the Pub/Sub emulator (the Google Cloud CLI), which `spool bench` users may not have.
        if options.groups?.contains("pubsub") == true { rows += try await context.pubSubRows() }
        if options.groups?.contains("postgres") == true || (options.groups == nil && options.postgres != nil) {
            rows += try await context.postgresRows()
        }
        // Only when asked: it starts a PostgreSQL cluster of its own.
        if options.groups?.contains("postgres-limit") == true { rows += try await context.postgresLimitRows() }
        if options.runs("collector") { rows += try await context.collectorRows() }
        // Only when asked: it starts nginx and, without --postgres, a PostgreSQL cluster.
        if options.groups?.contains("fleet") == true { rows += try await context.fleetRows() }
        if options.runs("open") { rows += try await context.openRows() }
        if options.runs("memory") { rows += try await context.memoryRows() }
        if options.runs("trickle") { rows += try await context.trickleRows() }
        if options.runs("follow") { rows += try await context.followRows() }
        if options.runs("group") { rows += try await context.groupRows() }
        return Pass(hardware: hardware, rows: rows)
    }

    /// Said at the start and in the report's note when this code was built without
    /// optimisation: a debug build's figures measure the compiler, not Spool (the
    /// PostgreSQL rows made 2–8% of COPY in debug builds and 74% in release).
    static var buildWarning: String? {
        #if DEBUG
        "A debug build: these figures are not Spool's; build with -c release."
        #else
        nil
        #endif
    }
}

/// What every scenario group needs.
struct Context: Sendable {
    let options: BenchOptions
    let baseline: (any Baseline)?
    let scratch: Scratch
    let spool: SpoolSide
    let progress: @Sendable (String) -> Void

    var events: EventSet { spool.events }

    /// One measurement: a name and a body that gets a fresh directory.
    struct Step: Sendable {
        let key: String
        let body: @Sendable (String) async throws -> Run
    }

    /// Runs the steps of both sides alternately (Spool, baseline, Spool, …), once each (the
    /// runs of ``BenchOptions/runs`` repeat them). Each step gets a fresh directory, removed
    /// afterwards.
    func alternate(_ spoolSteps: [Step], _ baselineSteps: [Step]) async throws -> [String: Run] {
        var order = [Step]()
        for index in 0..<max(spoolSteps.count, baselineSteps.count) {
            if index < spoolSteps.count { order.append(spoolSteps[index]) }
            if index < baselineSteps.count { order.append(baselineSteps[index]) }
        }
        var runs = [String: Run]()
        for step in order {
            let directory = try scratch.fresh(step.key.filter { $0.isLetter || $0.isNumber })
            let run = try await step.body(directory)
            scratch.remove(directory)
            progress("  \(step.key): \(format(run.rate))/s over \(format(run.seconds)) s"
                + (run.latencies.map { ", p50 \(format($0.p50)) µs, p99 \(format($0.p99)) µs" } ?? ""))
            runs[step.key] = run
        }
        return runs
    }
}
