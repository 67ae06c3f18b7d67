/// How a figure moved against a saved baseline run: the relative change of its median, the
/// interval of that change, and the verdict.
///
/// The change is `median(new) / median(old) − 1`; its interval is the percentile bootstrap of
/// that quotient, the two runs resampled independently (``Bootstrap``). The verdict is
/// ``Verdict/improved`` or ``Verdict/regressed`` only when the interval excludes 0 *and* the
/// change passes ``Change/threshold``; otherwise ``Verdict/withinNoise``; against a baseline
/// median of 0, ``Verdict/notComparable``. Pure: no I/O.
package struct Change: Sendable, Codable, Equatable {
    /// `median(new) / median(old) − 1`: +0.10 is 10% more.
    package var relative: Double
    /// The confidence interval of ``relative``.
    package var low: Double
    package var high: Double
    package var verdict: Verdict

    /// The smallest change that can be a verdict, however tight its interval: 5%. Smaller
    /// moves are within what a shared machine's disk does from one minute to the next.
    package static let threshold = 0.05

    /// The change from `old` to `new` samples (each non-empty). `higherIsBetter` says whether
    /// a larger figure is an improvement (rates) or a regression (times, sizes). With fewer
    /// than 2 samples on a side there is no interval to judge by: ``Verdict/tooFewRuns``.
    package init(from old: [Double], to new: [Double], higherIsBetter: Bool,
                threshold: Double = Change.threshold, bootstrap: Bootstrap = Bootstrap()) {
        precondition(!old.isEmpty && !new.isEmpty, "a change needs samples on both sides")
        func quotient(_ old: Double, _ new: Double) -> Double { old == 0 ? (new == 0 ? 0 : .infinity) : new / old - 1 }
        relative = quotient(Estimate.median(old), Estimate.median(new))
        (low, high) = bootstrap.interval([old.count, new.count]) { draws in
            quotient(Estimate.median(draws[0].map { old[$0] }), Estimate.median(draws[1].map { new[$0] }))
        }
        if !(relative.isFinite && low.isFinite && high.isFinite) {
            // A baseline median of 0 (say, no memory growth at all) has no scale for a
            // relative change; an infinite one would also not encode as JSON.
            (relative, low, high) = (0, 0, 0)
            verdict = .notComparable
        } else if old.count < 2 || new.count < 2 {
            verdict = .tooFewRuns
        } else if (low > 0 || high < 0) && abs(relative) >= threshold {
            verdict = (relative > 0) == higherIsBetter ? .improved : .regressed
        } else {
            verdict = .withinNoise
        }
    }
}

/// What a ``Change`` says about a figure.
package enum Verdict: String, Sendable, Codable {
    case improved
    case regressed
    case withinNoise = "within noise"
    /// A side has a single sample: no interval to judge by.
    case tooFewRuns = "too few runs"
    /// The baseline's figure (or one of its resampled medians) is 0: a relative change has no
    /// meaning, and ``Change/relative`` and its interval are set to 0.
    case notComparable = "not comparable (baseline 0)"
}
