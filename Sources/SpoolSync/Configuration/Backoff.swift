/// Exponential backoff with full jitter, as a pure function.
///
/// The first step is short, as in AWS's SDKs (100 ms, full jitter) and Google's client
/// libraries (100 ms, ×1.3), rather than Vector's 1 s: the worker starts the backoff over
/// after every delivered batch, so a first step is what one failure among successes costs (a
/// 503 on one batch while others go through), and at 1 s a 20% failure rate made a drain
/// 200 times slower. A server that keeps failing still pushes the wait to a minute in ten
/// steps.
///
/// After the n-th consecutive failure the worker waits a uniformly random time in
/// `0 ... min(cap, base × factor^(n-1))` ("full jitter", which spreads a fleet of clients
/// that failed together), and never less than the server's `Retry-After` (itself capped at
/// ``maxRetryAfter`` so a bad header cannot park the worker for days).
/// The randomness is passed in, so the delay is testable.
public struct Backoff: Sendable, Hashable {
    /// The ceiling of the first delay. The default is 100 ms.
    public var base: Duration = .milliseconds(100)
    /// How much the ceiling grows per consecutive failure. The default is 2. Range: 1 ... 100.
    public var factor: Double = 2
    /// The largest ceiling. The default is 60 s.
    public var cap: Duration = .seconds(60)
    /// The longest `Retry-After` honoured. The default is 1 hour.
    public var maxRetryAfter: Duration = .seconds(3600)

    /// The defaults: 100 ms doubling to 60 s, full jitter, `Retry-After` honoured up to an hour.
    public init() {}

    /// A backoff from `base`, multiplied by `factor` after each failure up to `cap`, honouring
    /// a `Retry-After` up to `maxRetryAfter`.
    public init(base: Duration, factor: Double = 2, cap: Duration, maxRetryAfter: Duration = .seconds(3600)) {
        self.base = base
        self.factor = factor
        self.cap = cap
        self.maxRetryAfter = maxRetryAfter
    }

    /// The wait before the next attempt.
    ///
    /// - Parameters:
    ///   - failures: consecutive failures so far, at least 1 (smaller values count as 1).
    ///   - retryAfter: the server's `Retry-After`, if any; the result is never shorter.
    ///   - unit: a random draw in `0 ..< 1` (values outside are clamped).
    /// - Complexity: O(1).
    public func delay(afterFailures failures: Int, retryAfter: Duration? = nil, unit: Double) -> Duration {
        let exponent = Double(max(failures, 1) - 1)
        let ceiling = min(cap.seconds, base.seconds * pow(factor, min(exponent, 1024)))
        let jittered = Duration.nanoseconds(Int64((ceiling * min(max(unit, 0), 1) * 1e9).rounded()))  // whole ns: no float noise
        guard let retryAfter else { return jittered }
        return max(jittered, min(max(retryAfter, .zero), maxRetryAfter))
    }

    func validate() throws(SyncError) {
        func fail(_ field: String, _ why: String) -> SyncError {
            SyncError(.invalidConfiguration, "SyncConfiguration.backoff.\(field) \(why)")
        }
        guard base > .zero, base <= .seconds(3600) else { throw fail("base", "is \(base); it must be between 0 (excluded) and 1 hour") }
        guard factor >= 1, factor <= 100 else { throw fail("factor", "is \(factor); it must be between 1 and 100") }
        guard cap >= base, cap <= .seconds(86_400) else { throw fail("cap", "is \(cap); it must be between base and 1 day") }
        guard maxRetryAfter >= .zero else { throw fail("maxRetryAfter", "is \(maxRetryAfter); it must not be negative") }
    }
}

/// `x` raised to `y` for y ≥ 0 by squaring, without Foundation.
private func pow(_ x: Double, _ y: Double) -> Double {
    var result = 1.0
    var remaining = Int(y)
    var square = x
    while remaining > 0 {
        if remaining & 1 == 1 { result *= square }
        square *= square
        remaining >>= 1
        if result.isInfinite { break }
    }
    return result
}
