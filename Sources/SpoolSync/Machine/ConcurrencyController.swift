/// How many requests the sync worker keeps in flight: fixed, or adapted to the server's
/// answers (additive increase, multiplicative decrease, as TCP and Vector's adaptive request
/// concurrency do).
///
/// The worker sends in *rounds*: up to ``limit`` batches go out together, and the next round
/// starts when all are answered. After each round the controller is told how it went:
///
/// - **Overload** (a 429, a 503 or a timeout in the round): the limit halves (at least 1),
///   and a *ceiling* is remembered: the level of the round before when doubling overshot,
///   else just below the level where it happened. The limit climbs back to the ceiling one
///   step per healthy round, and probes one past it only after ``probeInterval`` healthy
///   rounds there. A probe the server refuses sends the limit back to the ceiling (not to
///   half) and doubles the wait before the next probe (up to ``maximumProbeInterval``); one it
///   takes raises the ceiling. A server that sheds load past 8 in flight thus settles the
///   worker at 8, with ever rarer probes, instead of a sawtooth of 503s.
/// - **Rising latency** (the round took more than twice the fastest recent round, plus
///   ``latencySlack``): the limit drops by a tenth. A server that queues requests instead of
///   refusing them is not pushed further.
/// - **Healthy and full** (every slot was used): the limit grows by one; until the first
///   sign of strain it doubles instead (a slow start, as TCP's), so a short drain over a long
///   path does not spend most of its rounds at 1, 2, 3 requests.
///
/// A round that did not fill the limit (fewer batches pending) changes nothing: it says
/// nothing about the server's capacity.
///
/// Pure: no clock of its own; the round trip arrives with each report.
struct ConcurrencyController: Sendable {
    /// Healthy rounds at the ceiling before the first probe past it.
    static let probeInterval = 20
    /// The longest wait between two probes, in healthy rounds.
    static let maximumProbeInterval = 1280
    /// Round trips within twice the floor plus this are not "rising".
    static let latencySlack: Duration = .milliseconds(5)
    /// How fast the remembered floor forgets a fast round (per round, as a fraction): so a
    /// path that became slower for good is accepted after a while.
    static let floorDrift = 0.02

    let maximum: Int
    let adaptive: Bool
    /// The number of requests the next round may hold.
    private(set) var limit: Int
    /// The highest limit used so far.
    private(set) var peak: Int
    /// Just below the level where the server last said it was overloaded.
    private(set) var ceiling: Int?
    /// The fastest recent round trip, drifting up slowly.
    private(set) var floor: Duration?
    private var healthyRoundsAtCeiling = 0
    /// Healthy rounds at the ceiling before the next probe.
    private(set) var roundsBetweenProbes = ConcurrencyController.probeInterval
    /// Doubling until the first overload or rising round trip.
    private(set) var slowStart = true

    init(_ concurrency: SyncConfiguration.Concurrency) {
        switch concurrency {
        case .fixed(let count):
            maximum = max(1, count)
            adaptive = false
            limit = maximum
        case .adaptive(let max):
            maximum = Swift.max(1, max)
            adaptive = true
            limit = 1
        }
        peak = limit
    }

    /// Reports a finished round.
    ///
    /// - Parameters:
    ///   - used: how many requests the round held.
    ///   - roundTrip: from the round's start to its last answer.
    ///   - overloaded: whether any answer said the server is overloaded (429, 503, a timeout).
    mutating func roundFinished(used: Int, roundTrip: Duration, overloaded: Bool) {
        guard adaptive else { return }
        if overloaded {
            healthyRoundsAtCeiling = 0
            if slowStart {
                // Doubling overshot: the server took half as many the round before.
                slowStart = false
                limit = max(1, limit / 2)
                ceiling = limit
                roundsBetweenProbes = Self.probeInterval
            } else if let ceiling, limit > ceiling {
                // A probe the server refused: the ceiling holds; probe less often.
                limit = ceiling
                roundsBetweenProbes = min(roundsBetweenProbes * 2, Self.maximumProbeInterval)
            } else {
                ceiling = max(1, limit - 1)
                limit = max(1, limit / 2)
                roundsBetweenProbes = Self.probeInterval
            }
            return
        }
        let rising = floor.map { roundTrip > $0 * 2 + Self.latencySlack } ?? false
        floor = floor.map { min(roundTrip, $0 + $0 * Self.floorDrift) } ?? roundTrip
        if rising {
            slowStart = false
            limit = max(1, limit - max(1, limit / 10))
            return
        }
        guard used >= limit, limit < maximum else { return }
        if let current = ceiling, limit > current {
            // A probe the server took: it handles this many now, and may take more.
            ceiling = limit
            roundsBetweenProbes = Self.probeInterval
        }
        if let ceiling, limit >= ceiling {
            healthyRoundsAtCeiling += 1
            guard healthyRoundsAtCeiling >= roundsBetweenProbes else { return }
            healthyRoundsAtCeiling = 0
        }
        limit = slowStart ? min(maximum, limit * 2) : limit + 1
        peak = max(peak, limit)
    }
}

extension SyncError {
    /// Whether the failure says the server is overloaded: a 429, a 408 or a 503, or no answer
    /// within the request timeout. The adaptive concurrency halves on these.
    var meansOverload: Bool {
        code == .rateLimited || code == .timeout || status == 503 || status == 408
    }
}
