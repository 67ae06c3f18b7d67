import Spool

/// What a benchmark run does and how long it may take. The defaults keep a full run to a
/// few minutes on a 2-core machine; ``quick`` takes seconds (for tests).
package struct BenchOptions: Sendable {
    /// Where logs and databases are made: the disk being measured. The default (`nil`) is
    /// a new directory under the system's temporary directory.
    package var directory: String?
    /// Distinct events generated, and the most any one measurement writes. The default is 200,000.
    package var events: Int = 200_000
    /// The most seconds one measurement may take. The default is 4.
    package var seconds: Double = 4
    /// Runs of every measurement: each figure is the median of them, with a bootstrap interval
    /// (``Estimate``). Each run measures every scenario and its baselines once, alternating
    /// sides, so runs interleave (A B A B …) and a slow stretch of the disk hits both sides.
    /// The default is 5 (the disk of a shared VM is noisy: one `fdatasync` can take 0.2 or
    /// 8 ms from one second to the next).
    package var runs: Int = 5
    /// Whether a warm-up run comes first, at ``quick``'s sizes, and is thrown away: it fills
    /// the page cache, starts the servers' binaries once and lets the CPU's clock settle.
    /// The default is true.
    package var warmUp = true
    /// Events stored, then drained, per drain measurement. The default is 100,000.
    package var drainEvents: Int = 100_000
    /// Events appended into the log capped at 10 MiB whose kept events the footprint row counts
    /// (issue #36): enough to pass the cap several times over. The default is 1,000,000.
    package var capEvents = 1_000_000
    /// The adaptive maximum of issue #26's sliding-window rows (`sync-window`), as
    /// `spool sync`'s default `--max-concurrency`. The default is 32.
    package var windowAdaptiveMax: Int = 32
    /// Segment sizes (bytes) for the open-after-crash scenario. The default is 1, 16 and
    /// 128 MiB; ``includeLargeOpen()`` adds 1 GiB.
    package var openSizes: [Int] = [1 << 20, 16 << 20, 128 << 20]
    /// Whether the open-after-crash scenario ends with a full active segment (the most any open
    /// reads; filling it writes a whole segment). ``quick`` leaves it out: in a debug build the
    /// fill alone took 24 of its 74 seconds.
    package var openFullActiveSegment = true
    /// Events in the backlog whose peak memory is measured (and a tenth as many beside it, to
    /// show it flat). The default is 10,000,000.
    package var backlogEvents: Int = 10_000_000
    /// Bytes written for the sequential-write baseline. The default is 256 MiB.
    package var sequentialBytes: Int = 256 << 20
    /// Producers of the synced scenario. The default is 1, 16 and 64.
    package var syncedProducers: [Int] = [1, 16, 64]
    /// Arrival rates (events/s) of the open-loop synced rows: appends that arrive on a
    /// clock, each from a task of its own, whatever the log's pace. The default is 25,000 and
    /// 100,000 a second (about 3 and 12 arrivals per `fdatasync` of a disk that makes 8,000).
    package var openLoopRates: [Double] = [25_000, 100_000]
    /// `Configuration.sealingThreads` of every Spool log; nil for the library's default.
    package var sealingThreads: Int? = nil
    /// Whether every Spool log has `Configuration.coldCompression` on (its defaults).
    package var coldCompression = false
    /// Events per acknowledgement of the pipelined producer (which keeps 4 in flight).
    /// The default is 1,024.
    package var pipelineWindow: Int = 1024

    /// Events trickled one at a time (each acknowledged at `written`) per trickle measurement,
    /// and how many the dictionary samples before training. The defaults are 10,000 and 4,000.
    package var trickleEvents = 10_000
    package var trickleTrainAfter = 4_000

    /// Scenario groups to run (`append`, `seal`, `drain`, `sync`, `collector`, `open`, `memory`, `trickle`, `follow`;
    /// `fleet`, only when named: devices → nginx → 1, 2, 3 collectors → PostgreSQL; or
    /// `synced`: only the synced appends of `append`; `sync-latency`: only the drains through a
    /// collector 0, 10 and 50 ms away, which `sync` includes; `sync-window`: only issue #26's rows, slow
    /// outliers, fast start, 503s and a full accept queue, which `sync` includes too); nil runs them all. For profiling one group. The default is nil.
    package var groups: Set<String>? = nil

    /// The PostgreSQL server of the `postgres` group (`postgres://USER@HOST:PORT/DB`), where
    /// it creates and drops tables named `bench_…`. The default is none: the group is not run.
    package var postgres: String? = nil

    /// Records appended one at a time (0.5 ms apart) per follow measurement. The default is 2,000.
    package var followEvents = 2_000
    /// The arguments that make this executable run ``runFollowProbe(directory:)`` (the log's
    /// directory is appended), for the follow rows' other process; nil leaves them out.
    /// `spool bench` and `compare` pass their hidden `--follow-probe`.
    package var followProbeArguments: [String]? = nil
    /// The hidden option that makes this executable one writer process of the group rows
    /// (``runAppendProbe(group:writer:count:)``), followed by the group's directory,
    /// `--probe-writer NAME` and `--probe-count N`; nil leaves the process rows out.
    /// `spool bench` and `compare` pass their hidden `--append-probe`.
    package var appendProbeArguments: [String]? = nil

    package init() {}

    func runs(_ group: String) -> Bool { groups?.contains(group) ?? true }

    /// A run of a few seconds that still touches every scenario (for tests and smoke runs).
    package static var quick: BenchOptions {
        var options = BenchOptions()
        options.events = 4_000
        options.seconds = 0.25
        options.runs = 1
        options.warmUp = false
        options.drainEvents = 4_000
        options.capEvents = 20_000
        options.openSizes = [256 << 10]
        options.openFullActiveSegment = false
        options.backlogEvents = 20_000
        options.sequentialBytes = 4 << 20
        options.syncedProducers = [1, 16]
        options.openLoopRates = [2_000]
        options.pipelineWindow = 256
        options.trickleEvents = 1_000
        options.trickleTrainAfter = 500
        options.followEvents = 200
        return options
    }

    /// Adds the 1 GiB open-after-crash case (a minute or more to fill).
    package mutating func includeLargeOpen() {
        if !openSizes.contains(1 << 30) { openSizes.append(1 << 30) }
    }

    var budget: Budget { Budget(events: events, seconds: seconds) }

    /// The configuration of every Spool log: the library's defaults, with ``sealingThreads``.
    var spoolConfiguration: Configuration {
        var configuration = Configuration()
        if let sealingThreads { configuration.sealingThreads = sealingThreads }
        if coldCompression { configuration.coldCompression = ColdCompression() }
        return configuration
    }
}
