extension ConcurrencyController {
    /// The shortest round trip over the last ``ConcurrencyTuning/floorWindow`` to two (a
    /// windowed minimum, as BBR's `min_rtt` filter): a path that became slower for good is
    /// taken as it is once the window has passed.
    struct RoundTripFloor: Sendable {
        /// The window going on: when it began, and its shortest round trip.
        private var current: (since: Duration, shortest: Duration)?
        /// The shortest round trip of the window before it.
        private var previous: Duration?

        /// The shortest round trip of the window and the one before; nil before any.
        var shortest: Duration? {
            guard let current else { return nil }
            return min(previous ?? current.shortest, current.shortest)
        }

        mutating func add(_ roundTrip: Duration, now: Duration) {
            guard let window = current, now - window.since < ConcurrencyTuning.floorWindow else {
                previous = current?.shortest
                current = (now, roundTrip)
                return
            }
            current = (window.since, min(window.shortest, roundTrip))
        }
    }
}
