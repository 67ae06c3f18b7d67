/// How many requests the sync worker keeps in flight: fixed, or adapted to the server's
/// answers and round-trip times.
///
/// The worker sends through a sliding window: a slot freed by an answer is refilled at once, up
/// to ``limit``, and the controller is told of every request sent, every request late, and
/// every answer. Adaptive, it grows from accepted answers to requests sent with every slot in
/// use (doubling every round trip during the *fast start*, then one a round trip), but not
/// from answers that waited at the server as long as they were served
/// (``Strain/queues(roundTrip:floor:)``), unless the destination declared how many it takes
/// at once (``declaredCapacity``). It comes down when the server shows strain:
/// overloaded answers that are a share of the traffic, round trips rising above their moving
/// average, or stalls that are a share of the traffic.
/// After a decrease it remembers a *ceiling* just below the level that strained the server,
/// climbs back to it, and probes one past it now and then. Strain shown by requests sent
/// before the last decrease counts no more: one decrease per round trip.
///
/// The rules are named functions: ``Strain`` tells strain from noise, ``Response`` moves the
/// limit; every constant is in ``ConcurrencyTuning``. `Benchmarks/README.md` tells which
/// measurements shaped them.
///
/// Pure: no clock of its own; times arrive with each report.
package struct ConcurrencyController: Sendable {
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
    /// How many times strain lowered the limit.
    private(set) var decreases = 0
    /// Just below the level where the server last showed strain.
    private(set) var ceiling: Int?
    /// The moving average of the epochs' mean round trips of accepted requests.
    private(set) var average: Duration?
    /// The moving average of how far epochs' means are from ``average``.
    private(set) var deviation: Duration = .zero
    private var healthyStepsAtCeiling = 0
    /// Healthy round trips at the ceiling before the next probe.
    private(set) var stepsBetweenProbes = ConcurrencyTuning.probeInterval
    /// Doubling every round trip until the first overload or rising round trip.
    private(set) var fastStart = true
    /// The shortest round trip answered in time lately: the path and the server's own time,
    /// with the least of a queue; what ``Strain/queues(roundTrip:floor:)`` reads against.
    private(set) var roundTripFloor = RoundTripFloor()
    /// How many requests the destination said, in its last answer, it takes at once, answering
    /// past them that it is overloaded (a Spool collector's `Spool-Max-Concurrent-Requests`):
    /// such a destination refuses what it cannot take, so its queue holds no growth.
    private(set) var declaredCapacity: Int?
    /// The last epoch's mean round trip waited in line (``Strain/queues(roundTrip:floor:)``);
    /// one answer's is noise on a loaded machine's loopback.
    private(set) var queueing = false
    /// Accepted answers toward the next step of growth.
    private var credit = 0
    /// The last time a request went out with every slot in use.
    private var lastFull: Duration?
    /// When the limit last went down.
    private var lastDecrease: Duration?
    /// The last ``ConcurrencyTuning/recentWindow`` requests settled, newest in the lowest bit: 1 for one reported
    /// late, 0 for one answered in time; those sent before the last decrease are left out.
    /// Cleared at each decrease.
    private(set) var recentLate: UInt32 = 0
    /// The last ``ConcurrencyTuning/recentWindow`` requests answered, newest in the lowest bit: 1 for an overloaded
    /// answer; those sent before the last decrease are left out. Cleared at each decrease.
    private(set) var recentOverload: UInt32 = 0
    /// How many answers ``recentOverload`` holds (at most ``ConcurrencyTuning/recentWindow``).
    private(set) var recentAnswers = 0
    /// The share of overloaded answers outside probes (a moving average over about 32
    /// answers): what a level the server holds draws anyway.
    private(set) var overloadRate = 0.0
    /// ``overloadRate`` when the limit last rose to each level (index 1 to ``maximum``): what
    /// the levels below it drew. A decrease goes back to the share of the level it lands on:
    /// the refusals of the levels above, which made it, are not what that level draws, and a
    /// trial judged against them passed where a quarter of its requests were refused.
    private var overloadRateReaching: [Double]
    /// The answers ``overloadRate`` has weighed.
    private var overloadRateAnswers = 0
    /// Answers to the requests sent since the probe started, and how many were overloaded.
    private var probe = (answers: 0, overloaded: 0)
    /// The round trips measured in the current epoch.
    private var epoch: (start: Duration, answers: Int, total: Duration)?
    /// The requests the server had in hand on average over the last epoch, answered in time
    /// (Little's law: the sum of their round trips over the epoch's length); nil before the
    /// first epoch ends.
    private(set) var sustained: Int?
    /// When the limit last went past the ceiling (a probe), or came down to it after refusals
    /// (a trial of the level they left it at), until the level is taken or refused. A stall of
    /// a request sent since refuses a probe; excess refusals refuse either.
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
        overloadRateReaching = Array(repeating: 0, count: maximum + 1)
    }

    /// A request in flight for longer than this is late (``late(sent:now:)``), and an epoch
    /// whose mean is above it is rising (``Strain/lateAfter(average:deviation:)``); nil before
    /// the first epoch has measured a round trip.
    var lateAfter: Duration? {
        average.map { Strain.lateAfter(average: $0, deviation: deviation) }
    }

    /// A request was sent; `inFlight` counts it.
    mutating func sent(inFlight: Int, now: Duration) {
        if inFlight >= limit { lastFull = now }
    }

    /// A request sent at `sent` has been in flight past ``lateAfter``: reported once per request.
    /// Strain when stalls are a share of the traffic (``Strain/stallsAreAShare(recent:)``), or
    /// when it went out during a probe (the probe is refused). During the fast start, the
    /// limit then goes to the level the server had in hand, not to half.
    mutating func late(sent: Duration, now: Duration) {
        stalled += 1
        guard !isStale(sent) else { return }
        if let probeSince, sent >= probeSince, let ceiling, limit > ceiling {
            return strained(sent: sent, now: now, decrease: Response.gentleDecrease)
        }
        recentLate = recentLate << 1 | 1
        guard Strain.stallsAreAShare(recent: recentLate) else { return }
        strained(sent: sent, now: now, decrease: Response.gentleDecrease, fastStartLevel: inHand)
    }

    /// The destination's answer just received said it takes `capacity` requests at once, or
    /// (nil) said nothing of it (``declaredCapacity``).
    mutating func destinationDeclared(capacity: Int?) {
        declaredCapacity = capacity
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
        if !isStale(sent) { count(signal, sent: sent, wasLate: wasLate) }
        if case .accepted = signal, !wasLate {
            roundTripFloor.add(roundTrip, now: now)
            measure(roundTrip, now: now)
        }
        switch signal {
        case .overloaded:
            // A refused probe goes back to the ceiling; a refused trial one below it.
            if probeRefused { return strained(sent: sent, now: now, decrease: Response.stepDown, refused: true) }
            let atCapacity = fastStart && Strain.refusesWhileQueueing(recent: recentOverload, queueing: queueing)
            guard atCapacity || Strain.overloadIsAShare(recent: recentOverload, answers: recentAnswers, limit: limit) else { return }
            strained(sent: sent, now: now, decrease: Response.overloadDecrease, fastStartLevel: inHand, servedLevel: inHand, refused: true)
        case .accepted:
            // An answer that waited in line as long as it was served says more in flight would
            // wait too: no growth from it (TCP Vegas holds its window on such a queue), unless
            // the destination declared how many it takes and refuses the rest
            // (``Strain/queueHoldsGrowth(roundTrip:floor:declaredCapacity:)``).
            let queued = !wasLate && queueHoldsGrowth(roundTrip)
            guard adaptive, !queued, let lastFull, lastFull >= sent, !isStale(sent) else { return }
            credit += 1
            if credit >= Response.answersPerStep(limit: limit, fastStart: fastStart) {
                credit = 0
                grow(now: now)
            }
        case .failed, .neutral:
            break
        }
    }

    /// Counts an answer to a request sent at `sent`, since the last decrease, in the recent
    /// stalls and overloads, in the probe's answers, or in the share of overloaded answers.
    private mutating func count(_ signal: Signal, sent: Duration, wasLate: Bool) {
        if !wasLate { recentLate <<= 1 }
        let overloaded = signal == .overloaded
        recentOverload = recentOverload << 1 | (overloaded ? 1 : 0)
        recentAnswers = min(recentAnswers + 1, ConcurrencyTuning.recentWindow)
        if let probeSince, sent >= probeSince {
            probe.answers += 1
            if overloaded { probe.overloaded += 1 }
        } else if probeSince == nil, signal != .neutral {
            // The plain mean until the moving average has as many answers as it weighs: one
            // started at 0 read 20% of refusals as 9% after 20 answers, and a trial judged
            // against that stepped down a level a flaky balancer holds.
            overloadRateAnswers += 1
            let weight = max(ConcurrencyTuning.smoothingPerAnswer, 1 / Double(overloadRateAnswers))
            overloadRate += ((overloaded ? 1 : 0) - overloadRate) * weight
        }
    }

    /// A probe past the ceiling, or a trial at it, is on and drew more refusals than the levels
    /// before (``Strain/probeRefused(overloaded:answers:limit:rate:)``).
    private var probeRefused: Bool {
        guard probeSince != nil, let ceiling, limit >= ceiling else { return false }
        return Strain.probeRefused(overloaded: probe.overloaded, answers: probe.answers, limit: limit, rate: overloadRate)
    }

    /// Whether `roundTrip` waited in line as long as it was served: against the shortest round
    /// trip lately (``Strain/queues(roundTrip:floor:)``); false before any is known.
    private func waitedInLine(_ roundTrip: Duration) -> Bool {
        roundTripFloor.shortest.map { Strain.queues(roundTrip: roundTrip, floor: $0) } ?? false
    }

    /// Whether an answer after `roundTrip` holds growth: it waited in line, and the destination
    /// declared no capacity (``Strain/queueHoldsGrowth(roundTrip:floor:declaredCapacity:)``).
    private func queueHoldsGrowth(_ roundTrip: Duration) -> Bool {
        roundTripFloor.shortest.map {
            Strain.queueHoldsGrowth(roundTrip: roundTrip, floor: $0, declaredCapacity: declaredCapacity)
        } ?? false
    }

    /// Whether a request sent at `sent` went out before the last decrease.
    private func isStale(_ sent: Duration) -> Bool {
        lastDecrease.map { sent < $0 } ?? false
    }

    /// Adds a round trip to the epoch; an epoch older than the average round trip is judged
    /// first, and its mean goes into the moving average.
    private mutating func measure(_ roundTrip: Duration, now: Duration) {
        if let current = epoch, now - current.start >= max(average ?? .zero, ConcurrencyTuning.shortestEpoch) {
            epoch = nil
            let mean = current.total / current.answers
            sustained = Strain.inHand(roundTrips: current.total, over: now - current.start)
            let rising = lateAfter.map { mean > $0 } ?? false
            queueing = waitedInLine(mean)
            if let average {
                let gap = mean > average ? mean - average : average - mean
                deviation = deviation * (1 - ConcurrencyTuning.smoothing) + gap * ConcurrencyTuning.smoothing
                self.average = average * (1 - ConcurrencyTuning.smoothing) + mean * ConcurrencyTuning.smoothing
            } else {
                average = mean
            }
            if rising { strained(sent: current.start, now: now, decrease: Response.gentleDecrease) }
        }
        if let current = epoch {
            epoch = (current.start, current.answers + 1, current.total + roundTrip)
        } else {
            epoch = (now, 1, roundTrip)
        }
    }

    /// The server showed strain (about a request sent at `sent`): back off, and remember where.
    /// Where refusals end the fast start, or a step down they made lands, the level is on
    /// trial (``probeSince``) as a probe is: a server that takes `C` at once refuses under half
    /// of the answers up to `2C`, too few for ``Strain/overloadIsAShare(recent:answers:limit:)``
    /// but more than the levels before drew, and a trial that draws such refusals steps down
    /// again. A trial judges refusals only, so strain without them starts none.
    ///
    /// - Parameters:
    ///   - fastStartLevel: where the fast start ends, if it is on (half the limit when nil).
    ///   - servedLevel: what the server took at once when it refused the rest (``inHand``,
    ///     for overload): the ceiling is no higher.
    ///   - refused: refusals showed the strain: the level landed on goes on trial.
    private mutating func strained(
        sent: Duration, now: Duration, decrease: (Int) -> Int, fastStartLevel: Int? = nil, servedLevel: Int? = nil,
        refused: Bool = false
    ) {
        guard adaptive, !isStale(sent) else { return }
        let before = limit
        defer { if limit < before { decreases += 1 } }
        lastDecrease = now
        recentLate = 0
        recentOverload = 0
        recentAnswers = 0
        healthyStepsAtCeiling = 0
        credit = 0
        probeSince = nil
        probe = (0, 0)
        if fastStart {
            fastStart = false
            limit = Response.fastStartEnd(limit: limit, level: fastStartLevel)
            ceiling = limit
            stepsBetweenProbes = ConcurrencyTuning.probeInterval
            if refused { probeSince = now }
        } else if let ceiling, limit > ceiling {
            // A probe the server refused: the ceiling holds; probe less often.
            limit = ceiling
            stepsBetweenProbes = Response.probeIntervalAfterRefusal(stepsBetweenProbes)
        } else {
            ceiling = Response.ceiling(limit: limit, served: servedLevel)
            limit = decrease(limit)
            stepsBetweenProbes = ConcurrencyTuning.probeInterval
            if refused, limit == ceiling { probeSince = now }
        }
        overloadRate = min(overloadRate, overloadRateReaching[limit])
    }

    /// A healthy round trip with every slot used: one more.
    private mutating func grow(now: Duration) {
        if probeSince != nil, let current = ceiling, limit >= current {
            // A probe (or a trial) is taken once its requests had the time to stall (a stall
            // refuses a probe), with no stalled request holding a slot (the server took one
            // fewer than the limit says), and while it draws no more refusals than the levels
            // before.
            if let probeSince, let after = lateAfter, now - probeSince <= after { return }
            guard stalled == 0 else { return }
            guard !Strain.drawsExcessRefusals(overloaded: probe.overloaded, answers: probe.answers, rate: overloadRate) else { return }
            ceiling = limit
            probeSince = nil
            probe = (0, 0)
            stepsBetweenProbes = ConcurrencyTuning.probeInterval
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
        overloadRateReaching[limit] = overloadRate
        peak = max(peak, limit)
    }
}
