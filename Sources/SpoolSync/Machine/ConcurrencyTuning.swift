/// Every constant of ``ConcurrencyController``, each with the reason for its value.
///
/// The rules that use them are ``ConcurrencyController/Strain`` (what shows the server is
/// strained) and ``ConcurrencyController/Response`` (how the limit answers).
enum ConcurrencyTuning {
    // MARK: Detecting strain

    /// How many of the last requests are looked at to tell a share from an outlier: a round
    /// trip's worth at the levels that matter, and the bits of one `UInt32`.
    static let recentWindow = UInt32.bitWidth
    /// Late requests among the last ``recentWindow`` that make stalls strain (about a fifth):
    /// at 2% of the requests late by chance, a late one has 5 more among the 31 before it about
    /// once in 3,000; a full accept queue stalls most of a burst.
    static let lateQuorum = 6
    /// Overloaded answers among the last ``recentWindow`` that make overload strain (half): at
    /// 20% of the answers refused at random this happens about once in 20,000 answers.
    static let overloadQuorum = 16
    /// The shortest run of overloaded answers in a row that is strain at a low limit: 4 in a
    /// row at 20% refused by chance come about once in 600 answers; a server refusing
    /// everything shows them within 4.
    static let shortestOverloadRun = 4
    /// A round trip this far above the rising threshold's other terms is still noise (a busy
    /// machine's scheduler, a garbage-collecting server), well below a dropped SYN's 1 s.
    static let latencySlack: Duration = .milliseconds(50)
    /// How many deviations above the average a round trip must be to count as rising, when
    /// that is more than the average itself (Vector's `rtt_deviation_scale`).
    static let deviationScale = 2.5
    /// The weight of the newest epoch in the moving averages (Vector's `ewma_alpha`).
    static let smoothing = 0.4
    /// The weight of one answer in the share of overloaded answers: about the last 32.
    static let smoothingPerAnswer = 1.0 / 32
    /// The shortest epoch, while no round trip is known: a loopback round trip is shorter, and
    /// an epoch of one answer says nothing.
    static let shortestEpoch: Duration = .milliseconds(1)
    /// How many times the shortest round trip lately shows the server queueing: twice is as
    /// much waiting as service. A rise of half (a loaded client's scheduler, a collector's
    /// fsync) is noise; Python's threaded server reads 1.6 at 2 in flight and 2.7 at 4.
    static let queueingRatio = 2.0
    /// How long the shortest round trip is remembered (BBR's `min_rtt` window is 10 s): from
    /// one to two of these, after which a slower path is the new floor.
    static let floorWindow: Duration = .seconds(10)
    /// A probe is refused only past this many overloaded answers: one refusal at a level that
    /// draws none is chance.
    static let probeRefusals = 2
    /// A probe draws excess refusals past this multiple of the level below's share (plus
    /// ``probeRefusalAllowance``): a flaky balancer refusing 20% at every level refuses a probe
    /// no more than the ceiling.
    static let probeRefusalFactor = 2.0
    /// The refusals a probe may draw beyond ``probeRefusalFactor`` times the share: one, so that
    /// a level that draws none is not refused for a single refusal.
    static let probeRefusalAllowance = 1.0

    // MARK: Responding

    /// The divisor of a gentle decrease (rising round trips, stalls): a tenth, Vector's
    /// `decrease_ratio` of 0.9; a server that queues is not pushed further, nor emptied.
    static let gentleDecreaseDivisor = 10
    /// The divisor of a decrease on overload: half, TCP's multiplicative decrease.
    static let overloadDecreaseDivisor = 2
    /// Healthy round trips at the ceiling before the first probe past it: a probe's extra
    /// request is under 5% of the traffic.
    static let probeInterval = 20
    /// The wait before the next probe is multiplied by this after a refused probe (as TCP's
    /// retransmission timer): a server that holds at the ceiling is probed ever more rarely.
    static let probeBackoff = 2
    /// The longest wait between two probes, in healthy round trips: a server that scales out
    /// is found within minutes.
    static let maximumProbeInterval = 1280
}
