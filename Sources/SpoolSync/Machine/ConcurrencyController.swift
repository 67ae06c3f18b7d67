/// How many requests the sync worker keeps in flight: fixed, or adapted to the server's
/// answers and round-trip times (additive increase, multiplicative decrease, as TCP and
/// Vector's adaptive request concurrency do).
///
/// The worker sends through a sliding window: a slot freed by an answer is refilled at once,
/// up to ``limit``. The controller is told of every request sent and every answer:
///
/// - **Growth comes from accepted answers only**, and only from requests that went out while
///   every slot was in use (a window that was not full says nothing about the server's
///   capacity). During the *fast start* each such answer adds one, so the limit doubles every
///   round trip (TCP's slow start) until the first sign of strain; after it, a round trip's
///   worth of them (``limit`` answers) adds one. A failure of any kind never grows it: against
///   an always-500 server or a closed port the limit stays where it is.
/// - **Overload** (an error its sink marked ``SyncError/overloaded``: HTTP's 429, 408 and 503,
///   PostgreSQL's class 53, Pub/Sub's `RESOURCE_EXHAUSTED` and `UNAVAILABLE`, a timeout)
///   that is a share of the traffic: at least ``overloadQuorum`` (half) of the last
///   ``lateWindow`` requests answered (since the last decrease) said so, or the last round
///   trip's worth of answers did, in a row (``limit``, at least 4), when the limit is low. One
///   overloaded answer among successes (a flaky load balancer's 503s; 20% of the answers) is
///   not strain: its batch is retried on its own (``RetryBudget``) and the limit stays. Read
///   as strain, 20% of 503s halved the limit every round trip and pinned it at 1; counted
///   rather than in a row, 2 of them among 32 answers ended the fast start at 2. Then the
///   limit halves (at least 1), and a *ceiling* is remembered: what the server took at once
///   when it refused the rest (the accepted requests it had in hand, ``inHand``), and never
///   more than just below the level where it happened; the fast start ends there too. The
///   limit climbs back to the ceiling, and probes one past it only after ``probeInterval``
///   healthy round trips there. A probe the server refuses (more overloaded answers to the
///   requests sent since than the level below drew, ``overloadRate``) sends the limit back
///   to the ceiling (not to half) and doubles the wait before the next probe (up to
///   ``maximumProbeInterval``); one it takes raises the ceiling. A server that sheds load past 8 in flight thus settles the worker at
///   8, with ever rarer probes, instead of at the level where a third of the answers are
///   refused (13, which it reached before: the ceiling was just below that level).
/// - **A request to wait** (a failure carrying `Retry-After`) counts as overload when its sink
///   marked it so (a 429 or 503), a share of the traffic as any: only that batch waits the
///   time asked while the window flows. Read as strain at once, the 0.5% of 429s with
///   `Retry-After: 1` in `spool demo --faults` halved the limit 27 times in a drain of 4,000
///   batches.
/// - **Rising latency** (Vector's signal): the mean round trip of an *epoch* (about one
///   average round trip of answers) is above its moving average by more than the average
///   itself (or 2.5 deviations, if more) plus ``latencySlack``. The limit drops by a tenth (by
///   half during the fast start), with the same ceiling and probes. A server that queues
///   requests instead of refusing them is not pushed further.
/// - **Stalls** (a request in flight that long without an answer, reported by
///   ``late(sent:now:)``, so a stall counts before it ends) are strain only when they are a
///   share of the traffic: at least ``lateQuorum`` of the last ``lateWindow`` requests settled
///   (answered in time, or reported late) were late. Then the limit drops as for a rising
///   epoch. A full accept queue whose dropped SYNs cost the connections past it a second each
///   stalls a burst of requests at once, and is not pushed further: adaptive stays near what
///   one request in flight makes, or above. During the fast start, stalls that are strain end
///   it at the level the server sustained (``sustained``: the requests it had in hand, answered
///   in time, over the last epoch, by Little's law), not at half the limit: a stall is seen
///   only ``lateAfter`` after it began (dozens of round trips on a local network), and by then
///   the limit had doubled several times, so half of it was still past the queue and every
///   request past it stalled a second (a short drain then ended when its last stall did). The
///   other stalls of the burst went out before that decrease: one overflow counts once. A
///   stall of a request sent during a probe refuses the probe, and a probe is taken only once
///   its requests had ``lateAfter`` to stall. An *isolated* slow answer (a few percent of the
///   requests late at every level, the rest on time) is not strain: it holds its slot until
///   it is answered, and is left out of the moving average, but neither lowers the limit nor
///   sets a ceiling. Read as strain, 2% of the answers 1 s late at L in flight came 0.4·L
///   times a second and stepped the ceiling down to 2–3; at 2%, 6 of 32 late happen by chance
///   about once in 3,000 late answers (minutes apart at 32 in flight and 50 ms). The count starts
///   over at each decrease and leaves out requests sent before it, so the next decrease is
///   judged on requests sent at the new level.
///
/// One decrease per round trip: strain shown by requests sent before the last decrease
/// (answers already on their way) counts no more, as TCP reacts once per window of losses.
///
/// Pure: no clock of its own; times arrive with each report.
package struct ConcurrencyController: Sendable {
    /// Healthy round trips at the ceiling before the first probe past it.
    static let probeInterval = 20
    /// The longest wait between two probes, in healthy round trips.
    static let maximumProbeInterval = 1280
    /// Round trips this far above the rising threshold's other terms are still noise (a busy
    /// machine's scheduler, a garbage-collecting server), not strain. 10 ms let a loaded
    /// 2-core machine's hiccups hold adaptive at 1–2 in flight; a dropped SYN costs 1 s.
    static let latencySlack: Duration = .milliseconds(50)
    /// The weight of the newest epoch in the moving average (Vector's `ewma_alpha`).
    static let smoothing = 0.4
    /// How many deviations above the average a round trip must be to count as rising, when
    /// that is more than the average itself (Vector's `rtt_deviation_scale`).
    static let deviationScale = 2.5
    /// How many of the last requests settled are looked at to tell stalls from outliers
    /// (the bits of ``recentLate``).
    static let lateWindow = UInt32.bitWidth
    /// Late requests among the last ``lateWindow`` that make a stall strain: 6 of 32, about a
    /// fifth. At 2% of the requests late, a late one has 5 more among the 31 before it about
    /// once in 3,000; a full accept queue stalls most of a burst.
    static let lateQuorum = 6
    /// Overloaded answers among the last ``lateWindow`` that make overload strain: 16 of 32,
    /// half (or a round trip's worth in a row, at least 4, when the limit is lower). At 20%
    /// of the answers overloaded at random this happens by chance about once in 20,000
    /// answers; at 12 of 32 it was about once in 100, and each time the ceiling came down to
    /// what the server had in hand while probes won back one a time: the limit sank to 6
    /// against a server that took 32. A server past its slots refuses half a window at twice
    /// its slots (the fast start's overshoot) and its probes draw refusals the level below
    /// did not (``probeRefused``); a server refusing everything trips it within 4 answers.
    static let overloadQuorum = 16

    /// How an answer went, as far as capacity is concerned.
    enum Signal: Sendable {
        /// The destination took the request.
        case accepted
        /// A failure the sink marked ``SyncError/overloaded``: the destination is overloaded.
        case overloaded
        /// Any other failure worth retrying (a server error, a network error): no growth.
        case failed
        /// Too large or refused: says nothing about the server's capacity.
        case neutral
    }

    let maximum: Int
    let adaptive: Bool
    /// The number of requests that may be in flight.
    package private(set) var limit: Int
    /// The highest limit used so far.
    private(set) var peak: Int
    /// Just below the level where the server last showed strain.
    private(set) var ceiling: Int?
    /// The moving average of the epochs' mean round trips of accepted requests.
    private(set) var average: Duration?
    /// The moving average of how far epochs' means are from ``average``.
    private(set) var deviation: Duration = .zero
    private var healthyStepsAtCeiling = 0
    /// Healthy round trips at the ceiling before the next probe.
    private(set) var stepsBetweenProbes = ConcurrencyController.probeInterval
    /// Doubling every round trip until the first overload or rising round trip.
    private(set) var fastStart = true
    /// Accepted answers toward the next step of growth.
    private var credit = 0
    /// The last time a request went out with every slot in use.
    private var lastFull: Duration?
    /// When the limit last went down.
    private var lastDecrease: Duration?
    /// The last ``lateWindow`` requests settled, newest in the lowest bit: 1 for one reported
    /// late, 0 for one answered in time; those sent before the last decrease are left out.
    /// Cleared at each decrease.
    private(set) var recentLate: UInt32 = 0
    /// The last ``lateWindow`` requests answered, newest in the lowest bit: 1 for an overloaded
    /// answer; those sent before the last decrease are left out. Cleared at each decrease.
    private(set) var recentOverload: UInt32 = 0
    /// How many answers ``recentOverload`` holds (at most ``lateWindow``).
    private(set) var recentAnswers = 0
    /// The share of overloaded answers outside probes (a moving average over about 32
    /// answers): what a level the server holds draws anyway.
    private(set) var overloadRate = 0.0
    /// Answers to the requests sent since the probe started, and how many were overloaded.
    private var probe = (answers: 0, overloaded: 0)
    /// The round trips measured in the current epoch.
    private var epoch: (start: Duration, answers: Int, total: Duration)?
    /// The requests the server had in hand on average over the last epoch, answered in time
    /// (Little's law: the sum of their round trips over the epoch's length); nil before the
    /// first epoch ends.
    private(set) var sustained: Int?
    /// When the limit last went past the ceiling (a probe), until the probe is taken or
    /// refused: a stall of a request sent since refuses it.
    private(set) var probeSince: Duration?
    /// Requests reported late and not answered yet: slots the server may never have seen (a
    /// dropped SYN), so a window that holds them is not as full as it looks.
    private var stalled = 0

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

    /// A request in flight for longer than this is late (``late(sent:now:)``), and an epoch
    /// whose mean is above it is rising; nil before the first epoch has measured a round trip.
    var lateAfter: Duration? {
        average.map { $0 + max($0, deviation * Self.deviationScale) + Self.latencySlack }
    }

    /// A request was sent; `inFlight` counts it.
    mutating func sent(inFlight: Int, now: Duration) {
        if inFlight >= limit { lastFull = now }
    }

    /// A request sent at `sent` has been in flight past ``lateAfter``: reported once per request.
    /// Strain when at least ``lateQuorum`` of the last ``lateWindow`` requests were late, or
    /// when it went out during a probe (the probe is refused). During the fast start, the
    /// limit then goes to the level the server sustained (``sustained``), not to half.
    mutating func late(sent: Duration, now: Duration) {
        stalled += 1
        guard !isStale(sent) else { return }
        if let probeSince, sent >= probeSince {
            return strained(sent: sent, now: now, decrease: Self.tenth)
        }
        recentLate = recentLate << 1 | 1
        guard recentLate.nonzeroBitCount >= Self.lateQuorum else { return }
        strained(sent: sent, now: now, decrease: Self.tenth, fastStartLevel: inHand)
    }

    /// The requests the server took in hand at once lately, as far as answers in time tell:
    /// ``sustained`` over the last epoch, or the answers of the epoch going on if more (they
    /// came within one round trip). Nil before any answer.
    private var inHand: Int? {
        guard let answers = epoch?.answers else { return sustained }
        return max(sustained ?? 1, answers)
    }

    /// A request was answered (or failed) after `roundTrip`.
    ///
    /// - Parameter wasLate: the request was reported by ``late(sent:now:)`` already: its round
    ///   trip is left out of the average, so one stall counts once.
    mutating func answered(roundTrip: Duration, _ signal: Signal, wasLate: Bool = false, now: Duration) {
        let sent = now - roundTrip
        if wasLate {
            stalled = max(0, stalled - 1)
            // Its slot goes back to a request the server may not take: a probe is judged
            // from here on (a probe seen through a stalled slot was one request short).
            if probeSince != nil {
                probeSince = now
                probe = (0, 0)
            }
        }
        if !wasLate, !isStale(sent) { recentLate <<= 1 }
        if !isStale(sent) {
            let overloaded = signal == .overloaded
            recentOverload = recentOverload << 1 | (overloaded ? 1 : 0)
            recentAnswers = min(recentAnswers + 1, Self.lateWindow)
            if let probeSince, sent >= probeSince {
                probe.answers += 1
                if overloaded { probe.overloaded += 1 }
            } else if probeSince == nil, signal != .neutral {
                overloadRate += ((overloaded ? 1 : 0) - overloadRate) * Self.smoothingPerAnswer
            }
        }
        if case .accepted = signal, !wasLate { measure(roundTrip, now: now) }
        switch signal {
        case .overloaded:
            if probeRefused { return strained(sent: sent, now: now, decrease: Self.half) }
            guard overloadIsAShare else { return }
            strained(sent: sent, now: now, decrease: Self.half, fastStartLevel: inHand, servedLevel: inHand)
        case .accepted:
            guard adaptive, let lastFull, lastFull >= sent, !isStale(sent) else { return }
            credit += 1
            if credit >= (fastStart ? 1 : limit) {
                credit = 0
                grow(now: now)
            }
        case .failed, .neutral:
            break
        }
    }

    private static func tenth(_ limit: Int) -> Int { max(1, limit - max(1, limit / 10)) }
    private static func half(_ limit: Int) -> Int { max(1, limit / 2) }

    /// The weight of one answer in ``overloadRate``: about the last 32 answers.
    static let smoothingPerAnswer = 1.0 / 32

    /// A probe past the ceiling drew more overloaded answers than the level below it did:
    /// judged on a round trip's worth of answers at least, more than twice what
    /// ``overloadRate`` predicts for as many answers, plus one. Until then a probe that drew
    /// more than that share is not taken either (``grow(now:)``). A server past its slots
    /// refuses a probe's extra request every round trip (none refused at the ceiling); a
    /// flaky balancer refusing 20% at every level does not refuse a probe more than the
    /// ceiling, and the limit keeps probing upward. (Refused at the first overloaded answer, a
    /// probe against 20% of 503s was refused every time, and the limit never rose past the
    /// first ceiling.)
    private var probeRefused: Bool {
        guard probeSince != nil, let ceiling, limit > ceiling, probe.overloaded >= 2, probe.answers >= limit else { return false }
        return probeDrawsExcessRefusals
    }

    /// The probe's answers hold more refusals than twice what ``overloadRate`` predicts for
    /// as many, plus one.
    private var probeDrawsExcessRefusals: Bool {
        Double(probe.overloaded) > 2 * overloadRate * Double(probe.answers) + 1
    }

    /// Overloaded answers are a share of the traffic: ``overloadQuorum`` of the last
    /// ``lateWindow`` answered, or a whole round trip's worth in a row (the last ``limit``
    /// answers, at least 4) when the limit is low. A run, not a count: at 2 in flight, 2
    /// overloaded answers among 32 (20% of 503s from a flaky balancer, by chance) ended the
    /// fast start and pinned the limit at 1 or 2; 4 in a row at 20% come about once in 600
    /// answers, and a server refusing everything shows them within 4 answers.
    private var overloadIsAShare: Bool {
        if recentOverload.nonzeroBitCount >= Self.overloadQuorum { return true }
        let run = max(limit, 4)
        guard run < Self.lateWindow, recentAnswers >= run else { return false }
        let mask: UInt32 = (1 << UInt32(run)) - 1
        return recentOverload & mask == mask
    }

    /// Whether a request sent at `sent` went out before the last decrease.
    private func isStale(_ sent: Duration) -> Bool {
        lastDecrease.map { sent < $0 } ?? false
    }

    /// Adds a round trip to the epoch; an epoch older than the average round trip is judged
    /// first, and its mean goes into the moving average.
    private mutating func measure(_ roundTrip: Duration, now: Duration) {
        if let current = epoch, now - current.start >= max(average ?? .zero, .milliseconds(1)) {
            epoch = nil
            let mean = current.total / current.answers
            sustained = max(1, Int((current.total / (now - current.start)).rounded()))
            let rising = lateAfter.map { mean > $0 } ?? false
            if let average {
                let gap = mean > average ? mean - average : average - mean
                deviation = deviation * (1 - Self.smoothing) + gap * Self.smoothing
                self.average = average * (1 - Self.smoothing) + mean * Self.smoothing
            } else {
                average = mean
            }
            if rising { strained(sent: current.start, now: now, decrease: Self.tenth) }
        }
        if let current = epoch {
            epoch = (current.start, current.answers + 1, current.total + roundTrip)
        } else {
            epoch = (now, 1, roundTrip)
        }
    }

    /// The server showed strain (about a request sent at `sent`): back off, and remember where.
    ///
    /// - Parameters:
    ///   - fastStartLevel: where the fast start ends, if it is on (half the limit when nil).
    ///   - servedLevel: what the server took at once when it refused the rest (``inHand``,
    ///     for overload): the ceiling is no higher. Below the level where a share of the
    ///     answers turned overloaded (13 against 8 slots), which would leave a third of the
    ///     requests refused at the ceiling for good.
    private mutating func strained(
        sent: Duration, now: Duration, decrease: (Int) -> Int, fastStartLevel: Int? = nil, servedLevel: Int? = nil
    ) {
        guard adaptive, !isStale(sent) else { return }
        lastDecrease = now
        recentLate = 0
        recentOverload = 0
        recentAnswers = 0
        healthyStepsAtCeiling = 0
        credit = 0
        probeSince = nil
        probe = (0, 0)
        if fastStart {
            // Doubling overshot: the server took half as many the round trip before.
            fastStart = false
            limit = max(1, min(limit, fastStartLevel ?? limit / 2))
            ceiling = limit
            stepsBetweenProbes = Self.probeInterval
        } else if let ceiling, limit > ceiling {
            // A probe the server refused: the ceiling holds; probe less often.
            limit = ceiling
            stepsBetweenProbes = min(stepsBetweenProbes * 2, Self.maximumProbeInterval)
        } else {
            ceiling = max(1, min(limit - 1, servedLevel ?? limit))
            limit = decrease(limit)
            stepsBetweenProbes = Self.probeInterval
        }
    }

    /// A healthy round trip with every slot used: one more.
    private mutating func grow(now: Duration) {
        if let current = ceiling, limit > current {
            // A probe is taken once its requests had the time to stall (``lateAfter``: a
            // stall refuses it, ``late(sent:now:)``), and with no stalled request holding a
            // slot (the server took one fewer than the limit says).
            if let probeSince, let after = lateAfter, now - probeSince <= after { return }
            guard stalled == 0 else { return }
            // Not while it draws more refusals than the level below: on a loaded machine the
            // answers bunch up, and a probe was taken before its refusals were counted. (The
            // same threshold as the refusal's: a stricter one left a probe with one refusal at
            // a level that draws none neither taken nor refused, and the limit never grew again.)
            guard !probeDrawsExcessRefusals else { return }
            // A probe the server took: it handles this many now, and may take more.
            ceiling = limit
            probeSince = nil
            probe = (0, 0)
            stepsBetweenProbes = Self.probeInterval
        }
        guard limit < maximum else { return }
        if let ceiling, limit >= ceiling {
            healthyStepsAtCeiling += 1
            guard healthyStepsAtCeiling >= stepsBetweenProbes else { return }
            healthyStepsAtCeiling = 0
            probeSince = now
            probe = (0, 0)
        }
        limit += 1
        peak = max(peak, limit)
    }
}
