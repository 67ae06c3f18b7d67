import Spool

/// Records read from the consumer on their way to the server.
struct SyncBatch: Sendable {
    /// The records, in order (empty when the read only skipped dropped or expired ranges).
    var records: [Record]
    /// The offset a commit of this batch moves the consumer to: past its last record, and past
    /// any range the read skipped.
    var end: UInt64
    /// The sink's request, once built (a half made by a split has none until it is sent).
    var request: SinkRequest<any Sendable>?
    /// How the server answered, for a batch answered in a round and waiting in the queue for
    /// the batches before it; `nil` while it is still to be sent.
    var answer: Answer?

    enum Answer: Sendable {
        /// 2xx, with the body size: commit it once everything before it is committed.
        case accepted(bytes: Int)
        /// A lone record the server refuses: dead-letter it.
        case refused(SyncError)
        /// A failure worth retrying: back off until `until`, then read again from the offset.
        case failed(SyncError, until: Duration)
    }

    /// The payload bytes of the records.
    var payloadBytes: Int { records.reduce(0) { $0 + $1.payload.count } }

    init(records: [Record], end: UInt64, request: SinkRequest<any Sendable>? = nil) {
        self.records = records
        self.end = end
        self.request = request
    }

    /// Splits the batch in two halves of records (it must hold at least two).
    func split() -> (SyncBatch, SyncBatch) {
        precondition(records.count > 1, "only a batch of two records or more can be split")
        let middle = records.count / 2
        let first = Array(records[..<middle])
        return (SyncBatch(records: first, end: first[first.count - 1].seq + 1), SyncBatch(records: Array(records[middle...]), end: end))
    }
}
