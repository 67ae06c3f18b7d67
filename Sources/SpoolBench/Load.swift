import Foundation

/// How busy the machine was while a run measured: the 1-minute load average read before the
/// first measured run, before each of the others and at the end.
///
/// Two runs of one build on a shared machine drift with its load: a run beside a compiler
/// reads slower than one alone, and a comparison then measures the machine as much as the
/// code. ``difference(from:cores:)`` says when that is likely, so a verdict is read with it.
package struct Load: Sendable, Codable, Equatable {
    /// The 1-minute load averages, in the order they were read.
    package var samples: [Double]

    package init(samples: [Double]) { self.samples = samples }

    /// Their mean: the run's load (0 without samples).
    package var mean: Double { samples.isEmpty ? 0 : samples.reduce(0, +) / Double(samples.count) }

    /// Two runs' loads differ enough to move their figures when their means are at least half
    /// a runnable task per core apart: then one of them shared every core's time slices with
    /// other work for a good part of its run. Below that, the verdicts' intervals cover it.
    package static let differencePerCore = 0.5

    /// A sentence saying how this run's load differs from `baseline`'s on a machine of `cores`
    /// cores, or nil when the two are within ``differencePerCore`` per core (or either has no
    /// samples).
    package func difference(from baseline: Load, cores: Int) -> String? {
        guard !samples.isEmpty, !baseline.samples.isEmpty else { return nil }
        let gap = mean - baseline.mean
        guard abs(gap) >= Self.differencePerCore * Double(max(1, cores)) else { return nil }
        return String(format: "the machine was %@ during this run (mean 1-minute load %.1f) than during the baseline's (%.1f) on %d cores: "
                      + "a verdict may measure the load as much as the code", gap > 0 ? "busier" : "quieter", mean, baseline.mean, cores)
    }

    /// `/proc/loadavg`'s 1-, 5- and 15-minute load averages as written, or nil where there is
    /// no such file.
    static func averages() -> [String]? {
        (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)).map { $0.split(separator: " ").prefix(3).map(String.init) }
    }

    /// Adds the current 1-minute load average to ``samples`` (nothing where there is none).
    mutating func sample() {
        if let now = Self.averages()?.first.flatMap(Double.init) { samples.append(now) }
    }

    /// How `run`'s load differs from `baseline`'s (``difference(from:cores:)``); nil when either
    /// was saved without samples.
    package static func difference(_ run: Load?, from baseline: Load?, cores: Int) -> String? {
        guard let run, let baseline else { return nil }
        return run.difference(from: baseline, cores: cores)
    }
}
