extension ConcurrencyController {
    /// The rules that tell strain from noise: pure functions of what the controller saw, the
    /// constants in ``ConcurrencyTuning``.
    enum Strain {
        /// How long a request may be in flight before it is late, and the mean round trip past
        /// which an epoch is rising: the average plus the larger of itself and
        /// ``ConcurrencyTuning/deviationScale`` deviations, plus ``ConcurrencyTuning/latencySlack``.
        /// Anchor: Vector's ARC (a round trip past its moving average by scaled deviations).
        static func lateAfter(average: Duration, deviation: Duration) -> Duration {
            average + max(average, deviation * ConcurrencyTuning.deviationScale) + ConcurrencyTuning.latencySlack
        }

        /// Overloaded answers are a share of the traffic: ``ConcurrencyTuning/overloadQuorum`` of
        /// the last ``ConcurrencyTuning/recentWindow`` answers (`recent`, newest in the lowest
        /// bit; `answers` of them known), or the last `limit` (at least
        /// ``ConcurrencyTuning/shortestOverloadRun``) in a row when the limit is low.
        /// Anchor: TCP's fast retransmit (a run of signals is loss, one is noise).
        static func overloadIsAShare(recent: UInt32, answers: Int, limit: Int) -> Bool {
            if recent.nonzeroBitCount >= ConcurrencyTuning.overloadQuorum { return true }
            let run = max(limit, ConcurrencyTuning.shortestOverloadRun)
            guard run < ConcurrencyTuning.recentWindow, answers >= run else { return false }
            let mask: UInt32 = (1 << UInt32(run)) - 1
            return recent & mask == mask
        }

        /// Refusals (``ConcurrencyTuning/probeRefusals`` among `recent`, as
        /// ``overloadIsAShare(recent:answers:limit:)`` reads it) while the accepted answers wait
        /// in line (`queueing`: the last epoch's mean round trip, ``queues(roundTrip:floor:)``):
        /// the server is at its capacity, queueing what it takes and refusing the rest. It ends
        /// the fast start, whose growth the queue holds below the level where refusals become
        /// half the answers: a server that takes `C` at once refuses `(L - C) / L` at a limit
        /// `L`, under half up to `2C`. A server that refuses a share at random but does not
        /// queue is left to ``overloadIsAShare(recent:answers:limit:)``; one that does is sorted
        /// out by the trial of the level the fast start ends at.
        /// Anchor: HyStart (a rising delay ends slow start), with the refusals as the loss that
        /// confirms it.
        static func refusesWhileQueueing(recent: UInt32, queueing: Bool) -> Bool {
            queueing && recent.nonzeroBitCount >= ConcurrencyTuning.probeRefusals
        }

        /// Stalls are a share of the traffic: ``ConcurrencyTuning/lateQuorum`` of the last
        /// ``ConcurrencyTuning/recentWindow`` requests settled (`recent`, 1 for late) were late.
        /// Anchor: TCP's fast retransmit, as ``overloadIsAShare(recent:answers:limit:)``.
        static func stallsAreAShare(recent: UInt32) -> Bool {
            recent.nonzeroBitCount >= ConcurrencyTuning.lateQuorum
        }

        /// A probe's `answers` drew more refusals (`overloaded`) than the level below predicts:
        /// more than ``ConcurrencyTuning/probeRefusalFactor`` times `rate` (the share of
        /// overloaded answers outside probes) for as many answers, plus
        /// ``ConcurrencyTuning/probeRefusalAllowance``.
        /// Anchor: TCP Vegas and Netflix's Gradient2 (a level is judged against the baseline).
        static func drawsExcessRefusals(overloaded: Int, answers: Int, rate: Double) -> Bool {
            Double(overloaded) > ConcurrencyTuning.probeRefusalFactor * rate * Double(answers) + ConcurrencyTuning.probeRefusalAllowance
        }

        /// A probe at `limit` is refused: judged on a round trip's worth of answers at least,
        /// with ``ConcurrencyTuning/probeRefusals`` refusals or more, and excess ones
        /// (``drawsExcessRefusals(overloaded:answers:rate:)``).
        /// Anchor: TCP Vegas, as ``drawsExcessRefusals(overloaded:answers:rate:)``.
        static func probeRefused(overloaded: Int, answers: Int, limit: Int, rate: Double) -> Bool {
            overloaded >= ConcurrencyTuning.probeRefusals && answers >= limit
                && drawsExcessRefusals(overloaded: overloaded, answers: answers, rate: rate)
        }

        /// An answer's round trip is ``ConcurrencyTuning/queueingRatio`` times the `floor` (the
        /// shortest lately, ``RoundTripFloor``) or more: by Little's law the server holds as
        /// many requests waiting as it serves, so more in flight add waiting, not throughput.
        /// Anchor: TCP Vegas (expected against actual rate) and HyStart's delay increase, which
        /// ends TCP's slow start.
        static func queues(roundTrip: Duration, floor: Duration) -> Bool {
            roundTrip >= floor * ConcurrencyTuning.queueingRatio
        }

        /// An answer holds growth when it waited in line (``queues(roundTrip:floor:)``) and the
        /// destination declared no capacity. One that says how many requests it takes at once
        /// (`declaredCapacity`) answers past them that it is overloaded, at once, instead of
        /// queueing them where no answer shows it (a full accept queue): its refusals bound
        /// the growth, and a queue that rises with the load of other senders sharing it does not
        /// hold this one below its share (four devices draining into one collector on its own
        /// two cores each held at 6 to 12 in flight, where 12 or 16 each delivered a quarter to
        /// a third more than 8).
        /// Anchor: HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS` (the server says how many streams
        /// it takes) and Vegas's queue estimate for the servers that say nothing.
        static func queueHoldsGrowth(roundTrip: Duration, floor: Duration, declaredCapacity: Int?) -> Bool {
            declaredCapacity == nil && queues(roundTrip: roundTrip, floor: floor)
        }

        /// The requests the server had in hand on average over `length`, whose answers took
        /// `roundTrips` in all; at least 1.
        /// Anchor: Little's law (Netflix's concurrency-limits estimate in-flight the same way).
        static func inHand(roundTrips: Duration, over length: Duration) -> Int {
            max(1, Int((roundTrips / length).rounded()))
        }
    }
}
