/// One measured figure: a value with its unit, and per-call latencies when they were timed.
public struct Figure: Sendable, Codable {
    /// The value; in a report of several runs, the median of theirs (``estimate``).
    public var value: Double
    /// `"events/s"`, `"MB/s"`, `"ms"`, `"B/event"` or `"MiB"`.
    public var unit: String
    /// Per-call latencies; in a report of several runs, every run's calls together.
    public var latency: Latencies?
    /// A diagnostic shown beside the value, e.g. `"19 events/fsync"` (the first run's).
    public var note: String?
    /// The runs' values, their median and its interval (one sample for `--runs 1`).
    public var estimate: Estimate?

    public init(_ value: Double, _ unit: String, latency: Latencies? = nil, note: String? = nil) {
        self.value = value
        self.unit = unit
        self.latency = latency
        self.note = note
    }

    /// Whether a larger value is better: true for rates (`…/s`) and events kept, false for
    /// times and sizes.
    public var higherIsBetter: Bool { unit.hasSuffix("/s") || unit == "events" }

    /// An event rate from a run.
    public static func events(_ run: Run) -> Figure { Figure(run.rate, "events/s", latency: run.latencies, note: run.note) }
}

/// A target for a ratio (shown next to it, never asserted).
public struct Goal: Sendable, Codable {
    /// True when a larger ratio is better (`≥`), false when a smaller one is (`≤`).
    public var atLeast: Bool
    public var ratio: Double

    public static func atLeast(_ ratio: Double) -> Goal { Goal(atLeast: true, ratio: ratio) }
    public static func atMost(_ ratio: Double) -> Goal { Goal(atLeast: false, ratio: ratio) }

    /// Whether `ratio` meets the goal.
    public func isMet(by value: Double) -> Bool { atLeast ? value >= ratio : value <= ratio }
}

/// One line of the table: Spool's figure, what it is compared with, and the ratio.
///
/// The ratio is always Spool's value divided by the baseline's, so for rates bigger is
/// better and for sizes and times smaller is; the goal says which.
public struct Row: Sendable, Codable {
    /// The scenario group: `append`, `seal`, `drain`, `open`, `footprint`, `sync`.
    public var group: String
    /// What Spool did, e.g. `"synced ×64"`.
    public var scenario: String
    public var spool: Figure
    /// What Spool is compared with, e.g. `"SQLite FULL, 1/txn"` or `"raw zstd -1"`.
    public var baseline: String?
    public var baselineFigure: Figure?
    /// Spool's value over the baseline's; in a report of several runs, the median of the
    /// runs' ratios (each run's two sides measured back to back), with ``ratioEstimate``.
    public var ratio: Double?
    /// The runs' ratios, their median and its interval (one sample for `--runs 1`).
    public var ratioEstimate: Estimate?
    /// How Spool's figure moved against a saved baseline run (`--baseline`); nil without one.
    public var change: Change?
    /// Ratios shown as a percentage (`"%"`) or as a multiple (`"×"`).
    public var ratioStyle: String
    public var goal: Goal?
    public var goalMet: Bool?

    public init(group: String, scenario: String, spool: Figure, baseline: String? = nil, baselineFigure: Figure? = nil,
                percent: Bool = false, goal: Goal? = nil) {
        self.group = group
        self.scenario = scenario
        self.spool = spool
        self.baseline = baseline
        self.baselineFigure = baselineFigure
        self.ratioStyle = percent ? "%" : "×"
        self.goal = goal
        if let base = baselineFigure, base.value > 0 {
            let ratio = spool.value / base.value
            self.ratio = ratio
            self.goalMet = goal?.isMet(by: ratio)
        }
    }
}

/// Where, on what and how the runs happened.
public struct RunInfo: Sendable, Codable {
    /// Distinct events generated, and their mean size in bytes.
    public var events: Int
    public var meanEventBytes: Double
    /// The scratch directory the logs were made in.
    public var directory: String
    /// `/proc/loadavg`'s three averages before and after.
    public var loadBefore: String
    public var loadAfter: String
    /// Runs of every measurement, and whether a warm-up run came first.
    public var runs: Int
    public var warmUp: Bool
    /// The most seconds one measurement took.
    public var secondsPerMeasurement: Double
    /// The store Spool was compared with (`compare`: `"SQLite"`); nil for `spool bench`.
    public var baseline: String?
    /// The machine, the disk under the directory and the build.
    public var environment: Environment
    /// A warning about the build, or empty.
    public var note: String
}

/// Everything the runs measured: printed as a table and written as JSON (the file
/// `--save-baseline` keeps and `--baseline` compares against).
public struct Report: Sendable, Codable {
    /// The version of this JSON's layout: 2 since runs, intervals and the environment.
    public var version = 2
    public var run: RunInfo
    /// The hardware's ceilings, each the median of the runs'.
    public var hardware: HardwareFigures?
    public var rows: [Row]
    /// The saved run the rows' ``Row/change`` compare with, when there is one.
    public var comparedWith: Comparison?
}

/// What a report was compared with: the saved baseline's name, when it was measured, and
/// whether it ran in another environment.
public struct Comparison: Sendable, Codable {
    public var name: String
    /// The baseline's environment fields that differ from this run's (empty when none do):
    /// a change then measures the machine as much as the code.
    public var environmentDifferences: [String]
}

/// One run of every scenario, before the runs are merged into a ``Report``.
struct Pass: Sendable {
    var hardware: HardwareFigures
    var rows: [Row]
}
