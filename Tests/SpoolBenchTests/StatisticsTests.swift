import Foundation
import SpoolBench
import Testing

/// `Estimate` and `Change` on fixed samples: intervals whose value is known in closed form,
/// a planted regression found, an identical rerun within noise.
@Suite struct StatisticsTests {
    @Test func medianOfOddAndEvenCounts() {
        #expect(Estimate.median([3, 1, 2]) == 2)
        #expect(Estimate.median([4, 1, 3, 2]) == 2.5)
    }

    /// Resampling 5 draws from 1…5, the median is 1 with probability 5.8% (3 or more of the 5
    /// draws are 1), so the 2.5th percentile of the resampled medians is exactly 1 and, by
    /// symmetry, the 97.5th is exactly 5.
    @Test func intervalOfFiveDistinctValuesIsTheirRange() {
        let estimate = Estimate([4, 2, 5, 1, 3])
        #expect(estimate.median == 3)
        #expect(estimate.low == 1)
        #expect(estimate.high == 5)
        #expect(estimate.noisy)
        #expect(estimate.outliers.isEmpty)
    }

    /// Nine equal values and one far off: the resampled median is 100 unless 5 of 10 draws hit
    /// the outlier (p < 0.2%), so the interval is exactly [100, 100]; the outlier is flagged
    /// and kept.
    @Test func oneOutlierIsFlaggedAndDoesNotMoveTheInterval() {
        let samples: [Double] = [100, 100, 100, 100, 100, 100, 100, 100, 100, 1000]
        let estimate = Estimate(samples)
        #expect(estimate.median == 100)
        #expect(estimate.low == 100 && estimate.high == 100)
        #expect(estimate.outliers == [9])
        #expect(!estimate.noisy)
        #expect(estimate.samples == samples)
    }

    @Test func sameSamplesAndSeedReplayTheSameInterval() {
        let samples: [Double] = [980, 1010, 1003, 995, 1021, 990, 1007]
        #expect(Estimate(samples) == Estimate(samples))
        var other = Bootstrap()
        other.seed = 42
        let replay = Estimate(samples, bootstrap: other)
        #expect(replay == Estimate(samples, bootstrap: other))
        #expect(replay.median == Estimate(samples).median)
    }

    static let rates: [Double] = [10_120, 9_870, 10_040, 9_950, 10_210, 9_900, 10_080]

    @Test func plantedRegressionOfARateIsFound() {
        let slower = Self.rates.map { $0 * 0.8 }
        let change = Change(from: Self.rates, to: slower, higherIsBetter: true)
        #expect(change.verdict == .regressed)
        #expect(abs(change.relative + 0.2) < 1e-9)
        #expect(change.high < 0)
        // The same numbers as a time (smaller is better) are an improvement.
        #expect(Change(from: Self.rates, to: slower, higherIsBetter: false).verdict == .improved)
    }

    @Test func identicalRerunIsWithinNoise() {
        let rerun = Array(Self.rates.reversed())
        let change = Change(from: Self.rates, to: rerun, higherIsBetter: true)
        #expect(change.verdict == .withinNoise)
        #expect(change.relative == 0)
        #expect(change.low < 0 && change.high > 0)
    }

    /// A 2% move with an interval that excludes 0 is still below the 5% threshold.
    @Test func aSmallSureChangeIsWithinNoise() {
        let constant = [Double](repeating: 1000, count: 6)
        let change = Change(from: constant, to: constant.map { $0 * 1.02 }, higherIsBetter: true)
        #expect(change.low > 0)
        #expect(change.verdict == .withinNoise)
        #expect(Change(from: constant, to: constant.map { $0 * 1.10 }, higherIsBetter: true).verdict == .improved)
    }

    @Test func oneRunASideIsTooFewToJudge() {
        #expect(Change(from: [1000], to: [500], higherIsBetter: true).verdict == .tooFewRuns)
    }

    /// A baseline figure of 0 (no memory growth) has no scale: the change is "not comparable"
    /// and finite, so the run still saves as JSON (a full run once died encoding +inf here).
    @Test func aChangeFromZeroIsNotComparableAndEncodes() throws {
        for old in [[0.0, 0, 0, 0, 0], [0, 0.055, 0, 0, 0.055], [0.055, 0, 0.055, 0, 0.055]] {
            let change = Change(from: old, to: [0.055, 0.055, 0, 0.055, 0.055], higherIsBetter: false)
            #expect(change.verdict == .notComparable, "\(old)")
            #expect(change.relative.isFinite && change.low.isFinite && change.high.isFinite)
            #expect(try JSONDecoder().decode(Change.self, from: JSONEncoder().encode(change)) == change)
        }
        #expect(Change(from: [0, 0, 0], to: [0, 0, 0], higherIsBetter: false).verdict == .withinNoise)
    }

    /// A wide interval is called noisy: the samples of a disk that swings by half.
    @Test func wideIntervalIsNoisy() {
        #expect(Estimate([50, 100, 150, 80, 120]).noisy)
        #expect(!Estimate(Self.rates).noisy)
    }

    /// Two runs' loads are told apart when their means are half a task per core apart: the
    /// busy-then-quiet pair of issue 52's measurement (2.2 → 6.2 against 0.0 → 6.1 on 2 cores)
    /// is named, two quiet runs are not, and a baseline saved without samples says nothing.
    @Test func aDifferentLoadIsNamedInTheComparison() throws {
        let busy = Load(samples: [2.2, 4.8, 5.9, 6.0, 6.1, 6.2]), quiet = Load(samples: [0.0, 0.4, 0.6, 0.5, 0.3, 0.2])
        let said = try #require(quiet.difference(from: busy, cores: 2))
        #expect(said.contains("quieter") && said.contains("5.2") && said.contains("0.3"), "\(said)")
        #expect(try #require(busy.difference(from: quiet, cores: 2)).contains("busier"))
        #expect(quiet.difference(from: Load(samples: [0.9, 1.1]), cores: 2) == nil)
        #expect(busy.difference(from: quiet, cores: 16) == nil, "5 tasks on 16 cores leave every measurement a core")
        #expect(busy.difference(from: Load(samples: []), cores: 2) == nil)
        #expect(Load.difference(busy, from: nil, cores: 2) == nil, "a baseline saved before loads were recorded")
        #expect(Load.difference(quiet, from: busy, cores: 2) == said)
        #expect(try JSONDecoder().decode(Load.self, from: JSONEncoder().encode(busy)) == busy)
    }
}
