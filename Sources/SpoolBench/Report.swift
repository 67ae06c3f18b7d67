/// One measured figure: a value with its unit, and per-call latencies when they were timed.
package struct Figure: Sendable, Codable {
    /// The value; in a report of several runs, the median of theirs (``estimate``).
    package var value: Double
    /// `"events/s"`, `"MB/s"`, `"ms"`, `"B/event"` or `"MiB"`.
    package var unit: String
    /// Per-call latencies; in a report of several runs, every run's calls together.
    package var latency: Latencies?
    /// A diagnostic shown beside the value, e.g. `"19 events/fsync"` (the first run's).
    package var note: String?
    /// The runs' values, their median and its interval (one sample for `--runs 1`).
    package var estimate: Estimate?

    package init(_ value: Double, _ unit: String, latency: Latencies? = nil, note: String? = nil) {
        self.value = value
        self.unit = unit
        self.latency = latency
        self.note = note
    }

    /// Whether a larger value is better: true for rates (`…/s`) and events kept, false for
    /// times and sizes.
    package var higherIsBetter: Bool { unit.hasSuffix("/s") || unit == "events" }

    /// An event rate from a run.
    package static func events(_ run: Run) -> Figure { Figure(run.rate, "events/s", latency: run.latencies, note: run.note) }
}

/// A target for a ratio (shown next to it, never asserted).
package struct Goal: Sendable, Codable {
    /// True when a larger ratio is better (`≥`), false when a smaller one is (`≤`).
    package var atLeast: Bool
    package var ratio: Double

    package static func atLeast(_ ratio: Double) -> Goal { Goal(atLeast: true, ratio: ratio) }
    package static func atMost(_ ratio: Double) -> Goal { Goal(atLeast: false, ratio: ratio) }

    /// Whether `ratio` meets the goal.
    package func isMet(by value: Double) -> Bool { atLeast ? value >= ratio : value <= ratio }
}

/// One line of the table: Spool's figure, what it is compared with, and the ratio.
///
/// The ratio is always Spool's value divided by the baseline's, so for rates bigger is
/// better and for sizes and times smaller is; the goal says which.
package struct Row: Sendable, Codable {
    /// The scenario group: `append`, `seal`, `drain`, `open`, `footprint`, `sync`.
    package var group: String
    /// What Spool did, e.g. `"synced ×64"`.
    package var scenario: String
    package var spool: Figure
    /// What Spool is compared with, e.g. `"SQLite FULL, 1/txn"` or `"raw zstd -1"`.
    package var baseline: String?
    package var baselineFigure: Figure?
    /// Spool's value over the baseline's; in a report of several runs, the median of the
    /// runs' ratios (each run's two sides measured back to back), with ``ratioEstimate``.
    package var ratio: Double?
    /// The runs' ratios, their median and its interval (one sample for `--runs 1`).
    package var ratioEstimate: Estimate?
    /// How Spool's figure moved against a saved baseline run (`--baseline`); nil without one.
    package var change: Change?
    /// Ratios shown as a percentage (`"%"`) or as a multiple (`"×"`).
    package var ratioStyle: String
    package var goal: Goal?
    package var goalMet: Bool?

    package init(group: String, scenario: String, spool: Figure, baseline: String? = nil, baselineFigure: Figure? = nil,
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
package struct RunInfo: Sendable, Codable {
    /// Distinct events generated, and their mean size in bytes.
    package var events: Int
    package var meanEventBytes: Double
    /// The scratch directory the logs were made in.
    package var directory: String
    /// `/proc/loadavg`'s three averages before and after.
    package var loadBefore: String
    package var loadAfter: String
    /// The 1-minute load before each measured run and at the end (nil in baselines saved
    /// before it was recorded).
    package var load: Load?
    /// Runs of every measurement, and whether a warm-up run came first.
    package var runs: Int
    package var warmUp: Bool
    /// The most seconds one measurement took.
    package var secondsPerMeasurement: Double
    /// The store Spool was compared with (`compare`: `"SQLite"`); nil for `spool bench`.
    package var baseline: String?
    /// The machine, the disk under the directory and the build.
    package var environment: Environment
    /// A warning about the build, or empty.
    package var note: String
}

/// Everything the runs measured: printed as a table and written as JSON (the file
/// `--save-baseline` keeps and `--baseline` compares against).
package struct Report: Sendable, Codable {
    /// The version of this JSON's layout: 2 since runs, intervals and the environment.
    package var version = 2
    package var run: RunInfo
    /// The hardware's ceilings, each the median of the runs'.
    package var hardware: HardwareFigures?
    package var rows: [Row]
    /// The saved run the rows' ``Row/change`` compare with, when there is one.
    package var comparedWith: Comparison?
}

/// What a report was compared with: the saved baseline's name, when it was measured, and
/// whether it ran in another environment.
package struct Comparison: Sendable, Codable {
    package var name: String
    /// The baseline's environment fields that differ from this run's (empty when none do):
    /// a change then measures the machine as much as the code.
    package var environmentDifferences: [String]
    /// How the machine's load during this run differed from the baseline's, when enough to
    /// move figures (``Load/difference(from:cores:)``); nil otherwise.
    package var loadDifference: String?
}

/// One run of every scenario, before the runs are merged into a ``Report``.
struct Pass: Sendable {
    var hardware: HardwareFigures
    var rows: [Row]
}
