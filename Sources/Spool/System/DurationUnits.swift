extension Duration {
    /// The duration in whole nanoseconds, saturating at `Int64`'s bounds (a `Duration` holds
    /// far more: a configured age or timeout of `.seconds(Int64.max)` must not trap).
    /// One conversion for the package: the writer's linger and segment age, the uploaders' and
    /// the collector's timeouts.
    package var wholeNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (sum, carry) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !overflow, !carry else { return seconds < 0 ? .min : .max }
        return sum
    }

    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
