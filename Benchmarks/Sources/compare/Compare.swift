import ArgumentParser
import Foundation
import SQLiteBaseline
import BenchScenarios

/// `compare`: Spool against the Sensors Analytics SDK's SQLite design and against this
/// machine's limits, in one run, printed as ratios next to their goals.
@main
struct Compare: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Spool vs SQLite (the Sensors Analytics SDK's design) vs the hardware, as ratios.")

    @Option(help: "Where logs and databases are made (the disk measured). Default: a temporary directory.")
    var dir: String?
    @Option(help: "Events generated; the most one measurement writes.")
    var events: Int = BenchOptions().events
    @Option(help: "The most seconds one measurement takes.")
    var seconds: Double = BenchOptions().seconds
    @OptionGroup var runOptions: BenchRunOptions
    @Flag(help: "A run of seconds that touches every scenario.")
    var quick = false
    @Flag(help: "Add the 1 GiB open-after-crash case.")
    var largeOpen = false
    @Option(help: "Events in the backlog whose peak memory is measured (e.g. 10000000).")
    var backlog: Int?
    @Option(name: .customLong("only"), help: "Run only these scenario groups (append, seal, drain, sync, collector, open, memory, trickle, follow; fleet = devices → nginx → 1, 2, 3 collectors → PostgreSQL, only when named; synced = only the synced appends; sync-latency = only the drains through a collector 0, 10 and 50 ms away; sync-window = only issue #26's sliding-window rows; postgres-limit = a PostgreSQL of its own at max_connections 8, only when named); repeatable.")
    var groups: [String] = []
    @Option(help: "A PostgreSQL server (postgres://USER@HOST:PORT/DB) for the postgres rows: tables bench_… are created and dropped there.")
    var postgres: String?
    @Option(name: .customLong("producers"), help: "Producers of the synced scenario (default 1, 16, 64); repeatable.")
    var producers: [Int] = []

    @Option(name: .customLong("open-loop-rate"), help: "Arrival rates (events/s) of the open-loop synced rows (default 25000, 100000); repeatable.")
    var openLoopRates: [Double] = []

    @Option(name: .customLong("sealing-threads"), help: "Configuration.sealingThreads of Spool's logs (default: the library's, the active cores up to 4).")
    var sealingThreads: Int?

    @Flag(name: .customLong("cold-compression"), help: "Turn on Configuration.coldCompression (its defaults, in the background) in Spool's logs: to see what the background rewrite costs the other rows.")
    var coldCompression = false
    /// The adaptive maximum of the sync-window rows (to compare against another default).
    @Option(help: .hidden)
    var windowMax: Int?

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
        guard events > 0, seconds > 0 else { throw ValidationError("--events and --seconds must be positive") }
        guard openLoopRates.allSatisfy({ $0 > 0 && $0 <= 10_000_000 }) else { throw ValidationError("--open-loop-rate must be between 1 and 10000000 events/s") }
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
        options.appendProbeArguments = ["--append-probe"]
        options.followProbeArguments = ["--follow-probe"]
        options.directory = dir
        if !quick {
            options.events = events
            options.seconds = seconds
        }
        if largeOpen { options.includeLargeOpen() }
        if let backlog { options.backlogEvents = backlog }
        if !groups.isEmpty { options.groups = Set(groups) }
        options.postgres = postgres
        if !producers.isEmpty { options.syncedProducers = producers }
        if !openLoopRates.isEmpty { options.openLoopRates = openLoopRates }
        options.sealingThreads = sealingThreads
        options.coldCompression = coldCompression
        if let windowMax { options.windowAdaptiveMax = windowMax }
        runOptions.apply(to: &options)
        try await runOptions.run(BenchRunner(options: options, baseline: SQLiteBaseline())) { print($0, terminator: "") }
    }
}
