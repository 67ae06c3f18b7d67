/// One measured figure: a value with its unit, and per-call latencies when they were timed.
public struct Figure: Sendable, Codable {
    public var value: Double
    /// `"events/s"`, `"MB/s"`, `"ms"`, `"B/event"` or `"MiB"`.
    public var unit: String
    public var latency: Latencies?
    /// A diagnostic shown beside the value, e.g. `"19 events/fsync"`.
    public var note: String?

    public init(_ value: Double, _ unit: String, latency: Latencies? = nil, note: String? = nil) {
        self.value = value
        self.unit = unit
        self.latency = latency
        self.note = note
    }

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
    public var ratio: Double?
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

/// Where and on what a run happened.
public struct RunInfo: Sendable, Codable {
    public var events: Int
    public var meanEventBytes: Double
    public var directory: String
    public var cores: Int
    public var loadBefore: String
    public var loadAfter: String
    public var rounds: Int
    public var secondsPerMeasurement: Double
    public var baseline: String?
    public var note: String
}

/// Everything one run measured: printed as a table and written as JSON.
public struct Report: Sendable, Codable {
    public var run: RunInfo
    public var hardware: HardwareFigures?
    public var rows: [Row]
}
