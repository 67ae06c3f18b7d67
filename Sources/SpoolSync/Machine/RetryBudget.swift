/// Decides whether failures are a flaky destination's (retry each failed batch on its own
/// while the rest of the window flows) or a sick one's (back everything off): a token bucket,
/// as gRPC's retry throttling is.
///
/// Every retryable failure takes a token; every accepted answer returns ``refund``. Failed
/// batches are retried on their own while more than half the bucket is left; below that, a
/// failure halts the window and the whole worker backs off, up to a minute, as before.
///
/// **The constants, against the anchors.** gRPC's throttling (`maxTokens` 10, `tokenRatio`
/// 0.1: retries stop once failures pass about 9% of the requests), Finagle's `RetryBudget`
/// (retries up to 20% of the requests) and AWS's standard quota (500 tokens, 5 a retry, 1
/// back a success: about 17%) all protect a server from retries that multiply its load. Here
/// a retry replaces a request rather than adding one beside it (the window holds the same
/// number in flight, and the adaptive concurrency halves on overload), and every destination
/// drops repeats by record id, so the budget only has to tell a share of failures from most
/// requests failing. With a refund of 0.5 a token per accepted answer it holds up to a third
/// of the requests failing (one failure costs what two successes return); at 20% (a flaky
/// load balancer) it stays full. A server failing every request empties the half that
/// selective retries may use in ``capacity``/2 failures, and from then on the window backs
/// off as a whole, as the worker always did.
///
/// **The size.** 20 tokens (10 failures), as gRPC's ten, or twice the requests allowed in
/// flight when that is more: a window's worth of answers failing at once is one event (a
/// server past its request slots refusing the overshoot of a fast start, 24 of 32 at once
/// against 8 slots), and must not by itself halt the window and send again what was in
/// flight. A server failing everything still spends the half within about a round trip.
///
/// Pure: no clock, no randomness.
struct RetryBudget: Sendable {
    /// The smallest bucket.
    static let minimumCapacity = 20.0
    /// What an accepted answer returns.
    static let refund = 0.5

    /// The bucket's size, and its content at the start.
    let capacity: Double
    private(set) var tokens: Double

    /// A bucket for a worker allowing `inFlight` requests at once.
    init(inFlight: Int) {
        capacity = max(Self.minimumCapacity, Double(2 * inFlight))
        tokens = capacity
    }

    /// A failure retried on its own is allowed: more than half the bucket is left.
    var allowsRetry: Bool { tokens > capacity / 2 }

    /// A retryable failure takes a token.
    mutating func failed() { tokens = max(0, tokens - 1) }

    /// An accepted answer returns ``refund``.
    mutating func accepted() { tokens = min(capacity, tokens + Self.refund) }
}
