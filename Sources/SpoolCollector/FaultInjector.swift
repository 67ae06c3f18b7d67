import Spool

/// What the collector does to one request, drawn by ``FaultInjector``.
enum InjectedFault: Sendable, Equatable {
    /// Close the connection without an answer.
    case reset
    /// Answer 429 with `Retry-After`.
    case rateLimit
    /// Answer ``FaultConfiguration/failureStatus``.
    case failure
}

/// The per-request fault decision: a pure function of the configuration and a seeded
/// random sequence (SplitMix64), so the same seed and request order give the same faults.
///
/// Not thread-safe: the collector keeps it behind its lock.
struct FaultInjector: Sendable {
    /// One request's draw: an optional fault and the delay before answering.
    struct Draw: Sendable, Equatable {
        var fault: InjectedFault?
        var delay: Duration
    }

    private let faults: FaultConfiguration
    private var random: SplitMix64
    private var requests = 0

    init(faults: FaultConfiguration, seed: UInt64) {
        self.faults = faults
        self.random = SplitMix64(seed: seed)
    }

    /// Draws the next request's fault and delay. Always consumes two numbers of the sequence,
    /// so one request's outcome never shifts the next one's.
    mutating func next() -> Draw {
        let roll = random.nextUnit()
        let jitterRoll = random.nextUnit()
        var fault: InjectedFault?
        requests += 1
        // A third number only when slow answers are asked for: other seeds' sequences stay.
        let slow = faults.slowRate > 0 && random.nextUnit() < faults.slowRate
        if let every = faults.failEvery, requests % every == 0 {
            fault = .failure
        } else if roll < faults.resetRate {
            fault = .reset
        } else if roll < faults.resetRate + faults.rateLimitRate {
            fault = .rateLimit
        } else if roll < faults.resetRate + faults.rateLimitRate + faults.failureRate {
            fault = .failure
        }
        return Draw(fault: fault, delay: faults.latency + faults.latencyJitter * jitterRoll + (slow ? faults.slowLatency : .zero))
    }
}
