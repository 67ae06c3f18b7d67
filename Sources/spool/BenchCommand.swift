import ArgumentParser
import SpoolBench

/// `spool bench`: the Spool half of the benchmarks, alone, on the user's own disk, against
/// the disk's and CPU's limits (SQLite comparisons live in Benchmarks/'s `compare`).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Spool on this machine: append, seal, drain, open-after-crash, footprint.",
        discussion: """
            Prints a table of figures, each beside the hardware limit it is measured against. \
            Run it with --dir on the disk that will hold your logs. Every measurement runs --runs \
            times, interleaved with its baselines, after a warm-up: each figure and ratio is the \
            median, with a 95% percentile-bootstrap interval in brackets ("noisy" when wider than \
            20% of the median; outliers are counted, not dropped). --save-baseline NAME keeps the \
            run in --baseline-dir; --baseline NAME says per row "improved", "regressed" or "within \
            noise" (a change counts when its interval excludes 0 and it passes 5%); \
            --fail-on-regression PCT makes a regression an exit status of 1. --report DIR writes an \
            HTML page with charts. A full run takes some minutes; --quick takes seconds.
            """)

    @Option(help: "Where the logs are made (the disk measured). Default: a temporary directory.")
    var dir: String?
    @Option(help: "Events generated; the most one measurement writes.")
    var events: Int?
    @Option(name: .customLong("only"), help: "Run only these scenario groups (append, seal, drain, sync, collector, open, memory, trickle, follow, group; fleet = devices → nginx → 1, 2, 3 collectors → PostgreSQL, only when named; synced = only the synced appends; sync-latency = only the drains through a collector 0, 10 and 50 ms away); repeatable.")
    var groups: [String] = []
    @Option(help: "A PostgreSQL server (postgres://USER@HOST:PORT/DB) for the postgres rows: tables bench_… are created and dropped there.")
    var postgres: String?

    @Flag(help: "A run of seconds that touches every scenario.")
    var quick = false

    @OptionGroup var runOptions: BenchRunOptions

    /// The other process of the follow rows (``runFollowProbe(directory:)``).
    @Option(help: .hidden)
    var followProbe: String?

    /// A writer process of the group rows (``runAppendProbe(group:writer:count:)``): the group.
    @Option(help: .hidden)
    var appendProbe: String?
    @Option(help: .hidden)
    var probeWriter = "app"
    @Option(help: .hidden)
    var probeCount = 0

    func validate() throws {
        if let events, !(1...10_000_000).contains(events) { throw ValidationError("--events must be between 1 and 10,000,000 (the events are generated in memory)") }
    }

    func run() async throws {
        if let followProbe {
            try runFollowProbe(directory: followProbe)
            return
        }
        if let appendProbe {
            try runAppendProbe(group: appendProbe, writer: probeWriter, count: probeCount)
            return
        }
        var options = quick ? BenchOptions.quick : BenchOptions()
        options.appendProbeArguments = ["bench", "--append-probe"]
        options.followProbeArguments = ["bench", "--follow-probe"]
        options.directory = dir
        if let events { options.events = events }
        if !groups.isEmpty { options.groups = Set(groups) }
        options.postgres = postgres
        runOptions.apply(to: &options)
        try await runOptions.run(BenchRunner(options: options), write: Output.write)
    }
}
