/// Limits and tallies of one consumer read (the ``Committer``'s, for both consumers): fills a
/// batch from a cursor until it holds `maxCount` records or `maxBytes` of payload, or has
/// examined `max(maxCount, 100,000)` items (so a long run of expired records cannot make one
/// read walk the whole log or hold a notice per record: consecutive expired records are one
/// notice).
struct BatchFill {
    let maxCount: Int
    let maxBytes: Int
    let expiry: Expiry
    var bytes = 0
    var examined = 0
    /// Expired records counted by this read (not counted by an earlier one).
    var newlyExpired: UInt64 = 0
    /// Set when the next record would pass `maxBytes`.
    var stoppedForBytes = false

    func isFull(_ batch: ConsumerBatch) -> Bool {
        stoppedForBytes || batch.records.count >= maxCount || examined >= max(maxCount, 100_000)
    }

    /// Reads from `cursor` into `batch` until it is full or the cursor has nothing more.
    /// `countedThrough`: expired records below it were counted by an earlier read.
    mutating func fill(_ batch: inout ConsumerBatch, from cursor: LogCursor, countingExpiry countedThrough: inout UInt64) throws {
        while !isFull(batch) {
            let before = cursor.position
            guard let item = try cursor.next() else { return }
            examined += 1
            switch item {
            case .notice(let notice):
                Self.append(notice, to: &batch.notices)
                batch.endSeq = notice.range.upperBound
            case .record(let record):
                if expiry.isExpired(record.timestamp) {
                    Self.append(ReadNotice(kind: .expired, range: record.seq..<record.seq + 1, detail: expiry.reason), to: &batch.notices)
                    if record.seq >= countedThrough {
                        newlyExpired += 1
                        countedThrough = record.seq + 1
                    }
                    batch.endSeq = record.seq + 1
                    continue
                }
                if !batch.records.isEmpty && bytes + record.payload.count > maxBytes {
                    cursor.seek(to: before)
                    stoppedForBytes = true
                    return
                }
                bytes += record.payload.count
                batch.records.append(record)
                batch.endSeq = record.seq + 1
            }
        }
    }

    /// Merges consecutive notices of one kind so a long expired run is one notice.
    private static func append(_ notice: ReadNotice, to notices: inout [ReadNotice]) {
        if let last = notices.last, last.kind == notice.kind, last.range.upperBound == notice.range.lowerBound,
           notice.kind == .expired {
            notices[notices.count - 1].range = last.range.lowerBound..<notice.range.upperBound
        } else {
            notices.append(notice)
        }
    }
}

/// The expiry rules of a configuration, evaluated at one instant.
struct Expiry {
    let cutoff: Int64?
    let deadline: ReportingDeadline?
    let now: Int64

    init(configuration: Configuration, now: Int64) {
        self.now = now
        if let age = configuration.maxAge {
            let (seconds, attoseconds) = age.components
            cutoff = now - (seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        } else {
            cutoff = nil
        }
        deadline = configuration.reportingDeadline
    }

    @inline(__always)
    func isExpired(_ timestamp: Int64) -> Bool {
        if let cutoff, timestamp < cutoff { return true }
        if let deadline, now >= deadline.expiry(ofRecordAt: timestamp) { return true }
        return false
    }

    var reason: String {
        cutoff != nil ? "older than Configuration.maxAge" : "past Configuration.reportingDeadline"
    }
}
