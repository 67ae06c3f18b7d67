extension ConcurrencyController {
    /// The shortest round trip over the last ``ConcurrencyTuning/floorWindow`` to two (a
    /// windowed minimum, as BBR's `min_rtt` filter): a path that became slower for good is
    /// taken as it is once the window has passed.
    struct RoundTripFloor: Sendable {
        private var current: Duration?
        private var previous: Duration?
        private var since: Duration?

        /// The shortest round trip of the window and the one before; nil before any.
        var shortest: Duration? {
            guard let current else { return previous }
            return previous.map { min($0, current) } ?? current
        }

        mutating func add(_ roundTrip: Duration, now: Duration) {
            if let since, now - since >= ConcurrencyTuning.floorWindow {
                previous = current
                current = nil
                self.since = now
            } else if since == nil {
                since = now
            }
            current = min(current ?? roundTrip, roundTrip)
        }
    }
}
