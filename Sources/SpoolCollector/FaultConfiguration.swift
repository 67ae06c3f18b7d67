import Spool

/// The failures a ``Collector`` injects, so that uploaders can be tested against a bad server.
///
/// Each request draws one number from the collector's seeded random sequence and gets at most
/// one of: a connection reset (probability ``resetRate``), a 429 (``rateLimitRate``), or a
/// ``failureStatus`` answer (``failureRate``). The three rates must add up to at most 1.
/// Latency applies to every request; ``payloadTooLargeAbove`` and ``poisonMarker`` are rules,
/// not chances.
public struct FaultConfiguration: Sendable, Hashable {
    /// The chance that a request is answered ``failureStatus``. The default is 0.
    public var failureRate: Double = 0
    /// The status of an injected failure. The default is 503. Range: 400 ... 599.
    public var failureStatus: Int = 503
    /// The `Retry-After` seconds sent with injected failures (none if `nil`) and with 429s
    /// (1 if `nil`). The default is `nil`.
    public var retryAfterSeconds: Int? = nil
    /// The chance that a request is answered 429 Too Many Requests with `Retry-After`. The default is 0.
    public var rateLimitRate: Double = 0
    /// The chance that a connection is closed without an answer, after its body was read. The default is 0.
    public var resetRate: Double = 0
    /// Delay added before every answer. The default is zero.
    public var latency: Duration = .zero
    /// A random extra delay, uniform in `0 ..< latencyJitter`, added to ``latency``. The default is zero.
    public var latencyJitter: Duration = .zero
    /// The chance that an answer is slow: ``slowLatency`` more (a real link's outliers). Drawn
    /// apart from the faults above. The default is 0.
    public var slowRate: Double = 0
    /// The extra delay of a slow answer. The default is 1 s.
    public var slowLatency: Duration = .seconds(1)
    /// Bodies larger than this many bytes (as sent) are answered 413. The default is `nil` (no rule).
    public var payloadTooLargeAbove: Int? = nil
    /// Every `failEvery`-th request (the 3rd, 6th, 9th… when 3) is answered ``failureStatus``,
    /// besides the random faults: a server that fails often but never the same retry twice in
    /// a row. The default is `nil` (no rule). Range: 2 ... 1,000,000.
    public var failEvery: Int? = nil
    /// A batch holding a record whose data contains this text is answered 400 and recorded
    /// nowhere, so uploaders can test dead-lettering. The default is `nil` (no rule).
    public var poisonMarker: String? = nil

    public init() {}

    /// No injected failures.
    public static let none = FaultConfiguration()

    /// A flaky server: 20% of requests fail with 503 and `Retry-After: 1`, 5% are rate
    /// limited, 5% are reset, and answers take 5–25 ms.
    public static var flaky: FaultConfiguration {
        var faults = FaultConfiguration()
        faults.failureRate = 0.2
        faults.retryAfterSeconds = 1
        faults.rateLimitRate = 0.05
        faults.resetRate = 0.05
        faults.latency = .milliseconds(5)
        faults.latencyJitter = .milliseconds(20)
        return faults
    }

    /// Checks every field, naming the first that is out of range.
    public func validate() throws {
        func fail(_ field: String, _ why: String) -> SpoolError {
            SpoolError(.invalidConfiguration, "FaultConfiguration.\(field) \(why)")
        }
        for (name, rate) in [("failureRate", failureRate), ("rateLimitRate", rateLimitRate), ("resetRate", resetRate)] {
            guard rate >= 0, rate <= 1 else { throw fail(name, "is \(rate); it must be between 0 and 1") }
        }
        guard failureRate + rateLimitRate + resetRate <= 1 else {
            throw fail("failureRate", "+ rateLimitRate + resetRate is \(failureRate + rateLimitRate + resetRate); it must be at most 1")
        }
        guard (400...599).contains(failureStatus) else {
            throw fail("failureStatus", "is \(failureStatus); it must be between 400 and 599")
        }
        if let every = failEvery, !(2...1_000_000).contains(every) {
            throw fail("failEvery", "is \(every); it must be between 2 and 1,000,000")
        }
        if let seconds = retryAfterSeconds, seconds < 0 {
            throw fail("retryAfterSeconds", "is \(seconds); it must not be negative")
        }
        guard latency >= .zero else { throw fail("latency", "is \(latency); it must not be negative") }
        guard slowRate >= 0, slowRate <= 1 else { throw fail("slowRate", "is \(slowRate); it must be between 0 and 1") }
        guard slowLatency >= .zero else { throw fail("slowLatency", "is \(slowLatency); it must not be negative") }
        guard latencyJitter >= .zero else { throw fail("latencyJitter", "is \(latencyJitter); it must not be negative") }
        if let limit = payloadTooLargeAbove, limit < 0 {
            throw fail("payloadTooLargeAbove", "is \(limit); it must not be negative")
        }
        if let marker = poisonMarker, marker.isEmpty {
            throw fail("poisonMarker", "is empty; use nil for no rule")
        }
    }
}
