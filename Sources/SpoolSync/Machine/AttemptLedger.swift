/// What the requests of a range of offsets went through while its batches were in the window:
/// how many failed in a way worth retrying, and whether one was hedged. Kept when the batches
/// leave the window unsettled (a failure drops the batches behind it; a go-back drops them
/// all, to read them again), and given back to the batches read again over the same offsets,
/// so that `retries` bounds the requests of a batch whatever path retries it.
///
/// A batch read again may be cut differently (a 413 lowered the ceiling meanwhile): it takes
/// the most failures of any range it overlaps, and is hedged if any of them was. Ranges are
/// forgotten once committed past. Pure.
struct AttemptLedger: Sendable {
    private struct Entry: Sendable {
        var range: Range<UInt64>
        var failures: Int
        var hedged: Bool
    }

    private var entries: [Entry] = []

    /// Keeps what `batch`, leaving the window unsettled, went through.
    mutating func keep(_ batch: SyncBatch) {
        guard batch.failures > 0 || batch.hedged else { return }
        let range = batch.start..<batch.end
        if let index = entries.firstIndex(where: { $0.range == range }) {
            entries[index].failures = max(entries[index].failures, batch.failures)
            entries[index].hedged = entries[index].hedged || batch.hedged
        } else {
            entries.append(Entry(range: range, failures: batch.failures, hedged: batch.hedged))
        }
    }

    /// A request of `range`, abandoned in flight when its batch left the window, failed in a
    /// way worth retrying: one more failure for its records, after the most any range over
    /// them has (kept here, or `known`: the batches read again over it since). Every range
    /// kept over them is raised to it, so that a record's count is never below the failures
    /// of the requests that carried it, however differently they were cut.
    /// - Returns: the range's failures now.
    mutating func failed(_ range: Range<UInt64>, after known: Int) -> Int {
        let over = entries.indices.filter { entries[$0].range.overlaps(range) }
        let failures = max(known, over.map { entries[$0].failures }.max() ?? 0) + 1
        for index in over { entries[index].failures = max(entries[index].failures, failures) }
        if !entries.contains(where: { $0.range == range }) {
            entries.append(Entry(range: range, failures: failures, hedged: false))
        }
        return failures
    }

    /// `batch`, read again, with what the ranges it overlaps went through.
    func restored(_ batch: SyncBatch) -> SyncBatch {
        var batch = batch
        for entry in entries where entry.range.overlaps(batch.start..<max(batch.end, batch.start + 1)) {
            batch.failures = max(batch.failures, entry.failures)
            batch.hedged = batch.hedged || entry.hedged
        }
        return batch
    }

    /// The most failures of any range kept: what a drain that reads them all again retries.
    var mostFailures: Int { entries.map(\.failures).max() ?? 0 }

    /// Forgets the ranges the consumer is committed past.
    mutating func forget(below committed: UInt64) {
        entries.removeAll { $0.range.upperBound <= committed }
    }
}
