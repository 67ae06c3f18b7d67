/// The sequence numbers received from one log, in bounded memory.
///
/// Uploads from one log arrive in seq order, so the set is a contiguous watermark (every seq
/// below it was received) plus a few disjoint ranges received above it (after a gap: records
/// the log expired or dead-lettered, or a batch still being retried; many more for records a
/// fleet of collectors forwards, each from its own log, in its own order). When more than
/// ``maxRanges`` ranges pile up, the lowest range is forgotten: a seq of it that arrives again
/// is recorded again (a repeat, which the destination's id makes harmless), and a seq that
/// never arrived is never taken for a duplicate, so nothing is dropped. Not thread-safe.
struct ReceivedSeqs: Sendable, Equatable {
    /// The most ranges kept above the watermark.
    static let maxRanges = 1024

    /// Every seq below this was received.
    private(set) var watermark: UInt64 = 0
    /// Received seqs above the watermark: sorted, disjoint, not adjacent, each above the watermark.
    private(set) var ranges: [Range<UInt64>] = []

    init() {}

    func contains(_ seq: UInt64) -> Bool {
        if seq < watermark { return true }
        let index = firstRange(above: seq)
        return index > 0 && ranges[index - 1].contains(seq)
    }

    /// Adds `seq`; returns false (and changes nothing) if it was already there.
    @discardableResult
    mutating func insert(_ seq: UInt64) -> Bool {
        guard !contains(seq) else { return false }
        if seq == watermark {
            watermark += 1
            if let first = ranges.first, first.lowerBound == watermark {
                watermark = first.upperBound
                ranges.removeFirst()
            }
            return true
        }
        let index = firstRange(above: seq)  // ranges[index - 1] (if any) lies below seq
        let joinsBelow = index > 0 && ranges[index - 1].upperBound == seq
        let joinsAbove = index < ranges.count && ranges[index].lowerBound == seq + 1
        switch (joinsBelow, joinsAbove) {
        case (true, true):
            ranges[index - 1] = ranges[index - 1].lowerBound..<ranges[index].upperBound
            ranges.remove(at: index)
        case (true, false):
            ranges[index - 1] = ranges[index - 1].lowerBound..<seq + 1
        case (false, true):
            ranges[index] = seq..<ranges[index].upperBound
        case (false, false):
            ranges.insert(seq..<seq + 1, at: index)
            if ranges.count > Self.maxRanges {
                ranges.removeFirst()
            }
        }
        return true
    }

    /// The index of the first range whose lower bound is above `seq` (binary search).
    private func firstRange(above seq: UInt64) -> Int {
        var low = 0
        var high = ranges.count
        while low < high {
            let middle = (low + high) / 2
            if ranges[middle].lowerBound > seq { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
