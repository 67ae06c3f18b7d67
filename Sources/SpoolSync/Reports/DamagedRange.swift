import Spool

/// A range of records a sync skipped because the log could not read them (its stored bytes
/// failed a check: a `ReadNotice` of kind `corrupt`). They are lost: never delivered, and the
/// consumer is committed past them once they are recorded (``DeadLetterSink/recordDamage(_:consumer:)``),
/// unless ``SyncConfiguration/onDamage`` is ``SyncConfiguration/DamagePolicy/stop``.
public struct DamagedRange: Sendable, Equatable {
    /// The seqs skipped, half-open.
    public var seqs: Range<UInt64>
    /// The segment file the damaged bytes are in, as the reader named it.
    public var segment: String
    /// What failed, for a person (the reader's detail: file, offset and check; never a payload).
    public var reason: String

    /// The range a reader's notice reports.
    public init(_ notice: ReadNotice) {
        seqs = notice.range
        segment = String(notice.detail.prefix { $0 != ":" && $0 != " " })
        reason = notice.detail
    }

    /// How many records the range holds.
    public var records: UInt64 { seqs.upperBound - seqs.lowerBound }
}

/// Records skipped as damaged: how many, in how many ranges, and the first ranges (at most
/// ``DamageTally/keptRanges``: a log damaged all over must not grow a report without bound).
public struct DamageTally: Sendable, Equatable {
    /// The most ranges kept in ``ranges``.
    public static let keptRanges = 100
    /// Records skipped.
    public private(set) var records: UInt64 = 0
    /// Ranges skipped.
    public private(set) var rangeCount = 0
    /// The first ranges skipped, in the order they were committed past.
    public private(set) var ranges: [DamagedRange] = []

    /// Nothing skipped.
    public init() {}

    /// Counts `skipped`.
    public mutating func add(_ skipped: [DamagedRange]) {
        for range in skipped {
            records += range.records
            rangeCount += 1
            if ranges.count < Self.keptRanges { ranges.append(range) }
        }
    }

    /// Counts another tally's ranges too.
    public mutating func add(_ other: DamageTally) {
        records += other.records
        rangeCount += other.rangeCount
        ranges += other.ranges.prefix(Self.keptRanges - ranges.count)
    }
}
