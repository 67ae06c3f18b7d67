/// Something a reader met instead of records: every range of seqs it could not return,
/// and why. This is the one channel through which loss is reported.
public struct ReadNotice: Sendable, Equatable, CustomStringConvertible {
    /// Why a range could not be returned.
    public enum Kind: String, Sendable {
        /// Stored bytes failed a check (checksum, bounds, decompression): the range is lost.
        case corrupt
        /// Deleted by the `dropOldest` cap before this reader got to them.
        case dropped
        /// Older than `maxAge` or past the reporting deadline: skipped, never delivered.
        case expired
        /// Absent with no damaged bytes to show for it (for example a tail lost to power loss
        /// that a consumer had already passed, so seqs skipped ahead).
        case missing
    }

    /// Why the range was not returned.
    public var kind: Kind
    /// The seqs the reader did not return.
    public var range: Range<UInt64>
    /// Where and why, for a person (file and offset for corruption).
    public var detail: String

    /// A notice of `kind` for `range`, with a detail for people (never a payload).
    public init(kind: Kind, range: Range<UInt64>, detail: String) {
        self.kind = kind
        self.range = range
        self.detail = detail
    }

    /// How many seqs the notice covers.
    public var count: UInt64 { range.upperBound - range.lowerBound }  // `range.count` traps past Int.max

    /// `kind lower..<upper (count records): detail`.
    public var description: String {
        "\(kind) \(range.lowerBound)..<\(range.upperBound) (\(count) records): \(detail)"
    }
}

/// One item of a read: a record, or a notice about a range that could not be read.
public enum ReadItem: Sendable, Equatable {
    /// A record, in seq order.
    case record(Record)
    /// A range of seqs that could not be read (damaged, dropped, expired, missing).
    case notice(ReadNotice)
}
