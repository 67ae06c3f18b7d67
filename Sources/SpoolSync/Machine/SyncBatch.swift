import Spool

/// Records read from the consumer on their way to the server: one entry of the window.
struct SyncBatch: Sendable {
    /// The records, in order (empty when the read only skipped dropped or expired ranges).
    var records: [Record]
    /// The offset a commit of this batch moves the consumer to: past its last record, and past
    /// any range the read skipped.
    var end: UInt64
    /// The sink's request, once built (a half made by a split has none until it is sent).
    var request: SinkRequest<any Sendable>?
    /// The request's size as `maxBatchBytes` measures it, when known (HTTP: the body before
    /// compression): what a 413 ceiling is compared with.
    var encodedBytes: Int?
    /// Where the batch is in the window.
    var state: State = .unsent

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

    /// The payload bytes of the records.
    var payloadBytes: Int { records.reduce(0) { $0 + $1.payload.count } }

    /// The bytes a 413 ceiling is compared with: the encoded body when known, else the payload.
    var bodyBytes: Int { encodedBytes ?? payloadBytes }

    init(records: [Record], end: UInt64, request: SinkRequest<any Sendable>? = nil, encodedBytes: Int? = nil) {
        self.records = records
        self.end = end
        self.request = request
        self.encodedBytes = encodedBytes ?? request?.measuredBytes
    }

    /// Splits the batch in two unsent halves of records (it must hold at least two); each half's
    /// encoded size is estimated in proportion to its records.
    func split() -> (SyncBatch, SyncBatch) {
        precondition(records.count > 1, "only a batch of two records or more can be split")
        let middle = records.count / 2
        let first = Array(records[..<middle])
        let share = encodedBytes.map { ($0 * middle / records.count, $0 - $0 * middle / records.count) }
        return (SyncBatch(records: first, end: first[first.count - 1].seq + 1, encodedBytes: share?.0),
                SyncBatch(records: Array(records[middle...]), end: end, encodedBytes: share?.1))
    }

    /// The records before `limit` only (the batch must hold at least one), ending there.
    func prefix(before limit: UInt64) -> SyncBatch {
        let kept = Array(records.prefix { $0.seq < limit })
        return SyncBatch(records: kept, end: min(end, limit))
    }
}
