import Spool

/// Records read from the consumer on their way to the server: one entry of the window.
///
/// A batch covers the offsets `start ..< end`: its records, and any range the read skipped
/// among them (dropped by the cap, expired, or corrupt). The window is one contiguous run of
/// such ranges from the committed offset, each batch starting where the one before ends; the
/// machine checks it at every read and every commit (``SyncStateMachine/contiguityViolation(_:from:)``).
package struct SyncBatch: Sendable {
    /// The records as the sink is given them, in order (empty when the read only skipped
    /// dropped or expired ranges): unwrapped once, when they were read, and kept for every
    /// request made of them (a retry, a split's halves, a hedge).
    package var outgoing: [OutgoingRecord]
    /// The records as read from the log (each one's ``OutgoingRecord/stored``): what offsets,
    /// sizes and dead letters go by. A view of ``outgoing``; nothing is copied.
    package var records: LazyMapCollection<[OutgoingRecord], Record> { outgoing.lazy.map(\.stored) }
    /// The first offset the batch covers: the end of the batch before it (or the committed
    /// offset), at or below its first record's seq.
    package var start: UInt64
    /// The offset a commit of this batch moves the consumer to: past its last record, and past
    /// any range the read skipped.
    package var end: UInt64
    /// The ranges among its offsets the read skipped because the log could not read them
    /// (damaged bytes), in seq order: recorded before a commit passes them.
    package var damage: [DamagedRange] = []
    /// The sink's request, once built (a half made by a split has none until it is sent).
    var request: SinkRequest<any Sendable>?
    /// The request's size as `maxBatchBytes` measures it, when known (HTTP: the body before
    /// compression): what a 413 ceiling is compared with.
    var encodedBytes: Int?
    /// Where the batch is in the window.
    var state: State = .unsent
    /// How many times its requests failed in a way worth retrying (hedges aside), whatever
    /// path retried them: on its own (``RetryBudget``), after a go-back (kept in the machine's
    /// ``AttemptLedger`` while it is read again), or as a half of a split, which starts with
    /// the failures of the batch it comes from.
    var failures = 0
    /// After a failure retried on its own: unsent, and not sent again before this time.
    var retryAt: Duration?
    /// A second copy of the request in flight beside the first (a hedge, ``Hedging``): its
    /// slot and when it went. Only while the first copy is in flight too.
    var hedge: (slot: Int, sent: Duration)?
    /// A hedge went out for the batch: at most one per batch, retries included.
    var hedged = false

    enum State: Sendable {
        /// Read, not sent yet.
        case unsent
        /// Sent as the request in `slot` at `sent`.
        case inFlight(slot: Int, sent: Duration)
        /// Answered, waiting for the batches before it to be settled.
        case answered(Answer)
    }

    enum Answer: Sendable {
        /// 2xx, with the body size: commit it once everything before it is committed.
        case accepted(bytes: Int)
        /// A lone record the server refuses: dead-letter it.
        case refused(SyncError)
        /// A failure worth retrying: back off until `until`, then read again from the offset.
        case failed(SyncError, until: Duration)
    }

    /// How the server answered, once it has.
    var answer: Answer? {
        if case .answered(let answer) = state { return answer }
        return nil
    }

    /// The slot of the request carrying the batch, while it is in flight.
    var slot: Int? {
        if case .inFlight(let slot, _) = state { return slot }
        return nil
    }

    var isUnsent: Bool {
        if case .unsent = state { return true }
        return false
    }

    /// Unsent, and not waiting for its own retry's time: it may go out `now`.
    func isDue(_ now: Duration) -> Bool {
        isUnsent && !records.isEmpty && (retryAt ?? now) <= now
    }

    /// The payload bytes of the records.
    var payloadBytes: Int { records.reduce(0) { $0 + $1.payload.count } }

    /// The bytes a 413 ceiling is compared with: the encoded body when known, else the payload.
    var bodyBytes: Int { encodedBytes ?? payloadBytes }

    package init(outgoing: [OutgoingRecord], start: UInt64, end: UInt64, request: SinkRequest<any Sendable>? = nil, encodedBytes: Int? = nil) {
        self.outgoing = outgoing
        self.start = start
        self.end = end
        self.request = request
        self.encodedBytes = encodedBytes ?? request?.measuredBytes
    }

    /// Splits the batch in two unsent halves of records (it must hold at least two); each half's
    /// encoded size is estimated in proportion to its records. The halves keep the records as
    /// they were unwrapped, and the batch's ``failures``: a split is not a retry, and does not
    /// give its halves a new allowance either.
    func split() -> (SyncBatch, SyncBatch) {
        precondition(outgoing.count > 1, "only a batch of two records or more can be split")
        let middle = outgoing.count / 2
        let first = Array(outgoing[..<middle])
        let share = encodedBytes.map { ($0 * middle / outgoing.count, $0 - $0 * middle / outgoing.count) }
        let middleOffset = first[first.count - 1].stored.seq + 1
        var halves = (SyncBatch(outgoing: first, start: start, end: middleOffset, encodedBytes: share?.0),
                      SyncBatch(outgoing: Array(outgoing[middle...]), start: middleOffset, end: end, encodedBytes: share?.1))
        halves.0.failures = failures
        halves.1.failures = failures
        halves.0.damage = damage.filter { $0.seqs.lowerBound < middleOffset }
        halves.1.damage = damage.filter { $0.seqs.lowerBound >= middleOffset }
        return halves
    }

    /// The part of the batch before `limit` (its start must be below it): its records and
    /// damaged ranges before `limit`, ending there (a skipped range only, if none of its
    /// records is).
    func prefix(before limit: UInt64) -> SyncBatch {
        let kept = Array(outgoing.prefix { $0.stored.seq < limit })
        var part = SyncBatch(outgoing: kept, start: start, end: min(end, limit))
        part.damage = damage.compactMap { range in
            guard range.seqs.lowerBound < limit else { return nil }
            var cut = range
            cut.seqs = range.seqs.lowerBound..<min(range.seqs.upperBound, limit)
            return cut
        }
        return part
    }
}
