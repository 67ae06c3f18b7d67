/// Whether a collector has refused every request for load (503: no request slot free, or no
/// room in the body budget) for a while, which `GET /healthz` reports so that a load balancer
/// takes a collector that cannot keep up out of rotation.
///
/// Saturated at an instant means: the first load refusal since the last request admitted (to a
/// slot, its body read) is at least ``window`` old, and the latest is less than ``window`` old.
/// One admitted request ends it; so does a quiet ``window`` without a refusal (a load balancer
/// that took the collector out sends it nothing, and must see it healthy again to send more).
///
/// Thread safety: a value; ``Collector`` keeps it behind a lock.
struct Saturation: Sendable {
    /// How long every request must have been refused for load before the collector says it is
    /// saturated: long enough that a burst answered 503 for a moment (which senders retry on
    /// their own) does not take it out, short enough that a health check every few seconds sees
    /// a collector whose slots are stuck (a hung disk) within one or two checks.
    static let window: Duration = .seconds(5)

    private var firstRefusal: ContinuousClock.Instant?
    private var lastRefusal: ContinuousClock.Instant?

    /// A request refused for load at `now`.
    mutating func refused(at now: ContinuousClock.Instant) {
        if firstRefusal == nil { firstRefusal = now }
        lastRefusal = now
    }

    /// A request admitted: the collector is keeping up.
    mutating func admitted() {
        firstRefusal = nil
        lastRefusal = nil
    }

    /// Whether every request for ``window`` up to `now` was refused for load.
    func holds(at now: ContinuousClock.Instant) -> Bool {
        guard let firstRefusal, let lastRefusal else { return false }
        return now - firstRefusal >= Self.window && now - lastRefusal < Self.window
    }
}
