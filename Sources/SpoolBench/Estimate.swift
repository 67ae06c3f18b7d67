import Spool

/// What repeated measurements of one figure say: their median, a confidence interval of the
/// median, the samples flagged as outliers, and whether the interval is too wide to trust.
///
/// The interval is a percentile bootstrap (as criterion.rs computes it): the median of
/// ``Bootstrap/resamples`` resamples drawn with replacement, and the interval between their
/// 2.5th and 97.5th percentiles. Outliers are flagged with Tukey's fences (below
/// Q1 − 1.5 IQR or above Q3 + 1.5 IQR) and kept: the median is robust to them, and hiding
/// them would hide a noisy disk. Pure: no I/O, and the same samples and seed give the same
/// interval.
package struct Estimate: Sendable, Codable, Equatable {
    /// The median of the samples.
    package var median: Double
    /// The confidence interval of the median (95% by default), `low ≤ median ≤ high`.
    package var low: Double
    package var high: Double
    /// Every sample, in the order measured.
    package var samples: [Double]
    /// Indexes into ``samples`` of the values outside Tukey's fences.
    package var outliers: [Int]
    /// True when the interval's width passes ``Estimate/noisyWidth`` of the median: the
    /// figure is too noisy to read as more than a range.
    package var noisy: Bool

    /// The bound on the interval's width, relative to the median, past which an estimate is
    /// ``noisy``: 20%. (Two full runs on the project's shared 2-core VM stayed under it for
    /// most rows; a wider interval means the run cannot tell a 10% change from noise.)
    package static let noisyWidth = 0.20

    /// The estimate of `samples` (at least one) with `bootstrap`'s resamples and seed.
    package init(_ samples: [Double], bootstrap: Bootstrap = Bootstrap()) {
        precondition(!samples.isEmpty, "an estimate needs at least one sample")
        self.samples = samples
        median = Self.median(samples)
        (low, high) = bootstrap.interval([samples.count]) { draws in Self.median(draws[0].map { samples[$0] }) }
        outliers = Self.outsideFences(samples)
        noisy = Self.isWide(low: low, high: high, around: median)
    }

    /// The interval's width relative to the median (0 for a zero median).
    package var relativeWidth: Double { median == 0 ? 0 : (high - low) / abs(median) }

    static func isWide(low: Double, high: Double, around center: Double) -> Bool {
        center == 0 ? high > low : (high - low) / abs(center) > noisyWidth
    }

    /// The median of `values` (the mean of the middle two for an even count).
    package static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// The `q` quantile (0…1) of sorted `values`, interpolated linearly between ranks.
    static func quantile(_ sorted: [Double], _ q: Double) -> Double {
        let position = q * Double(sorted.count - 1)
        let below = Int(position.rounded(.down))
        let above = min(below + 1, sorted.count - 1)
        return sorted[below] + (sorted[above] - sorted[below]) * (position - Double(below))
    }

    /// Indexes of the values below Q1 − 1.5 IQR or above Q3 + 1.5 IQR (none under 4 values).
    static func outsideFences(_ values: [Double]) -> [Int] {
        guard values.count >= 4 else { return [] }
        let sorted = values.sorted()
        let q1 = quantile(sorted, 0.25), q3 = quantile(sorted, 0.75)
        let reach = 1.5 * (q3 - q1)
        return values.indices.filter { values[$0] < q1 - reach || values[$0] > q3 + reach }
    }
}

/// The percentile bootstrap behind every ``Estimate`` and ``Change``: how many resamples,
/// what confidence, and the seed that makes an interval replay exactly.
package struct Bootstrap: Sendable {
    /// Resamples drawn. The default is 10,000 (criterion.rs's default is 100,000; 10,000 puts
    /// the 2.5th percentile within a few hundredths of a percent of where 100,000 put it).
    package var resamples = 10_000
    /// The confidence of the interval. The default is 0.95.
    package var confidence = 0.95
    /// The seed of the resampling (Spool's `SplitMix64`). The default is fixed, so a run's
    /// intervals replay from its samples.
    package var seed: UInt64 = 0xB007_5724_9E37_79B9

    package init() {}

    /// The percentile interval of `statistic` over resamples of independent samples of
    /// `counts` values each (indexes drawn with replacement, one array per sample).
    func interval(_ counts: [Int], _ statistic: ([[Int]]) -> Double) -> (low: Double, high: Double) {
        var random = SplitMix64(seed: seed)
        var draws = counts.map { [Int](repeating: 0, count: $0) }
        var values = [Double]()
        values.reserveCapacity(resamples)
        for _ in 0..<resamples {
            for (sample, count) in counts.enumerated() {
                for i in 0..<count { draws[sample][i] = Int(random.next() % UInt64(count)) }
            }
            values.append(statistic(draws))
        }
        values.sort()
        let tail = (1 - confidence) / 2
        return (Estimate.quantile(values, tail), Estimate.quantile(values, 1 - tail))
    }
}
