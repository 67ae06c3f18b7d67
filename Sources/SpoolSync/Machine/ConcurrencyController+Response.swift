extension ConcurrencyController {
    /// The rules that move the limit: pure functions of where it stands, the constants in
    /// ``ConcurrencyTuning``.
    enum Response {
        /// Accepted answers (to requests sent with every slot in use) per step of growth: one
        /// during the fast start, so the limit doubles every round trip, and a round trip's
        /// worth (`limit`) after it, one more per round trip.
        /// Anchor: TCP's slow start, then the additive increase of its AIMD.
        static func answersPerStep(limit: Int, fastStart: Bool) -> Int {
            fastStart ? 1 : limit
        }

        /// The limit after rising round trips or stalls: a tenth less, at least one less, at
        /// least 1. Anchor: Vector's ARC (`decrease_ratio` 0.9).
        static func gentleDecrease(_ limit: Int) -> Int {
            max(1, limit - max(1, limit / ConcurrencyTuning.gentleDecreaseDivisor))
        }

        /// The limit after overload: half, at least 1.
        /// Anchor: TCP's AIMD (multiplicative decrease on loss).
        static func overloadDecrease(_ limit: Int) -> Int {
            max(1, limit / ConcurrencyTuning.overloadDecreaseDivisor)
        }

        /// The limit after a trial of the level strain left it at drew excess refusals: one
        /// less, at least 1; the next level down goes on trial.
        /// Anchor: TCP Vegas (one less per round trip while the queue estimate is too long).
        static func stepDown(_ limit: Int) -> Int {
            max(1, limit - 1)
        }

        /// Where the fast start ends: at `level`, what the server took when it showed strain,
        /// or half the limit when that is not known; never above the limit, at least 1.
        /// Anchor: TCP's slow-start threshold (half the window at the first loss).
        static func fastStartEnd(limit: Int, level: Int?) -> Int {
            max(1, min(limit, level ?? limit / 2))
        }

        /// The ceiling remembered at a decrease: just below the level where strain showed, and
        /// no higher than what the server took then (`served`, when known); at least 1.
        /// Anchor: TCP's slow-start threshold (growth slows where loss happened).
        static func ceiling(limit: Int, served: Int?) -> Int {
            max(1, min(limit - 1, served ?? limit))
        }

        /// The healthy round trips before the next probe, after one was refused: `steps`
        /// multiplied by ``ConcurrencyTuning/probeBackoff``, up to
        /// ``ConcurrencyTuning/maximumProbeInterval``.
        /// Anchor: TCP's retransmission timer (exponential backoff).
        static func probeIntervalAfterRefusal(_ steps: Int) -> Int {
            min(steps * ConcurrencyTuning.probeBackoff, ConcurrencyTuning.maximumProbeInterval)
        }
    }
}
