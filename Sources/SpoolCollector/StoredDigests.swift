/// The digests of the bytes stored under the most recent seqs of one log
/// (`OriginRecord.digest(of:)`), so that a repeat is a duplicate only when it is the same bytes.
///
/// A seq holds the digest of the record first stored under it, then of each conflict stored
/// after it (another record of the same id, with other bytes). Memory is bounded: the digests
/// of the ``capacity`` seqs remembered last are kept, the oldest forgotten first, at most
/// ``maxPerSeq`` per seq. A repeat of a
/// seq whose digests were forgotten cannot be compared, so the ledger stores it as a conflict:
/// it is never dropped. Not thread-safe.
struct StoredDigests: Sendable {
    /// The most seqs whose digests are kept: far more than the records of the batches a sender
    /// has in flight (50 records a batch by default), so a retry is compared, not stored again.
    static let capacity = 4096
    /// The most digests kept per seq: the first record's and the last conflicts'. A conflict
    /// whose digest was forgotten is stored again if it comes back, under the same id.
    static let maxPerSeq = 16

    private var digests: [UInt64: [UInt64]] = [:]
    /// The seqs remembered, oldest first from ``oldest`` (a ring of at most ``capacity``).
    private var order: [UInt64] = []
    private var oldest = 0

    init() {}

    /// Whether `digest` was stored under `seq` (and is still remembered).
    func holds(_ digest: UInt64, at seq: UInt64) -> Bool {
        digests[seq]?.contains(digest) ?? false
    }

    /// Remembers that `digest` was stored under `seq`, forgetting the oldest seq past ``capacity``.
    mutating func remember(_ digest: UInt64, at seq: UInt64) {
        if digests[seq] != nil {
            if digests[seq]!.count == Self.maxPerSeq { digests[seq]!.remove(at: 1) }
            digests[seq]!.append(digest)
            return
        }
        digests[seq] = [digest]
        if order.count < Self.capacity {
            order.append(seq)
        } else {
            digests[order[oldest]] = nil
            order[oldest] = seq
            oldest = (oldest + 1) % Self.capacity
        }
    }
}
