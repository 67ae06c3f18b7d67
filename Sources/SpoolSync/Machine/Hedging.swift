/// When the request holding the commit frontier is sent once more, and how many such copies
/// the budget allows: hedged requests ("The Tail at Scale", Dean and Barroso, 2013).
///
/// The window commits only through the longest prefix of settled batches, so one slow answer
/// at its head holds back everything answered behind it. Once the request of the batch at the
/// frontier (the oldest not settled) has been out longer than ``percentile`` of the recent
/// round trips, a second copy of it goes out: the same records, the same ids, so every
/// destination drops or accepts the repeat (collectors by id, PostgreSQL with
/// `ON CONFLICT DO NOTHING`, Pub/Sub at least once). The first copy accepted settles the batch.
///
/// **The constants, against the paper.** Dean and Barroso hedge after the 95th percentile of
/// the expected latency: it cut the 99.9th percentile from 1,800 ms to 74 ms for 2% more
/// requests. Only the frontier's request is hedged here (a slow answer behind it costs
/// nothing the window does not already hide), so the extra requests are about the share of
/// slow answers at the frontier; the budget caps them at 1 in ``cost`` = 20 (5%) of the
/// requests sent, saved up to ``burst`` hedges at most, so that a destination that turns slow
/// for everyone (where a copy only doubles the load) gets a few percent more requests, never
/// twice as many. No hedge before ``minimumSamples`` round trips are known (a percentile of
/// fewer is a guess), and never sooner than ``floor`` after the first copy: below it a copy
/// costs the destination as much as the wait it saves, and a loaded machine's scheduler alone
/// makes round trips that long.
///
/// Pure: no clock, no randomness; round trips arrive as measured.
struct Hedging: Sendable {
    /// The share of recent round trips a request must outlast to be hedged.
    static let percentile = 0.95
    /// How many recent round trips of accepted requests the percentile is taken over.
    static let samples = 64
    /// Round trips known before the first hedge.
    static let minimumSamples = 20
    /// The least time a request is out before it is hedged.
    static let floor: Duration = .milliseconds(10)
    /// Requests sent per hedge the budget allows: 20, so hedges stay under 5% of requests.
    static let cost = 20
    /// The most hedges the budget saves up.
    static let burst = 5

    /// Whether hedges go out at all: ``SyncConfiguration/hedging``, and more than one request
    /// may be in flight.
    let enabled: Bool
    /// The last ``samples`` round trips, oldest overwritten first.
    private var roundTrips: [Duration] = []
    /// The same round trips, in increasing order.
    private var ordered: [Duration] = []
    private var next = 0
    /// How long the frontier's request is out before it is hedged; nil until ``minimumSamples``
    /// round trips are known.
    private(set) var delay: Duration?
    /// The budget, in requests sent: ``cost`` of them pay for one hedge.
    private(set) var tokens = 0

    init(enabled: Bool) {
        self.enabled = enabled
    }

    /// When a request sent at `sent` may be hedged; nil when hedging is off, no percentile is
    /// known yet, or the budget has no hedge left.
    func due(sent: Duration) -> Duration? {
        guard enabled, tokens >= Self.cost, let delay else { return nil }
        return sent + delay
    }

    /// A request (not a hedge) went out: it earns the budget 1/``cost`` of a hedge.
    mutating func requestSent() {
        tokens = min(tokens + 1, Self.cost * Self.burst)
    }

    /// A hedge went out: it spends ``cost`` requests' worth of the budget.
    mutating func hedgeSent() {
        tokens -= Self.cost
    }

    /// A copy was accepted after `roundTrip` (measured from its own send).
    ///
    /// Complexity: O(``samples``), no sort: the round trips are also kept in order.
    mutating func measured(_ roundTrip: Duration) {
        guard enabled else { return }
        if roundTrips.count < Self.samples {
            roundTrips.append(roundTrip)
        } else {
            ordered.remove(at: Self.position(of: roundTrips[next], in: ordered))
            roundTrips[next] = roundTrip
        }
        ordered.insert(roundTrip, at: Self.position(of: roundTrip, in: ordered))
        next = (next + 1) % Self.samples
        guard ordered.count >= Self.minimumSamples else { return }
        let rank = Int((Self.percentile * Double(ordered.count)).rounded(.up)) - 1
        delay = max(ordered[min(max(rank, 0), ordered.count - 1)], Self.floor)
    }

    /// The first index in `sorted` whose value is not below `value`.
    private static func position(of value: Duration, in sorted: [Duration]) -> Int {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
