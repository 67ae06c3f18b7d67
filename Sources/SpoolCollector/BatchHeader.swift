/// The `Spool-Batch: <log id>:<first seq>-<last seq>` request header, which names the log
/// and the range of sequence numbers a batch carries.
struct BatchHeader: Sendable, Equatable {
    /// The header's name.
    static let name = "spool-batch"

    /// 32 lowercase hexadecimal digits.
    var logID: String
    /// The first and last sequence numbers of the batch.
    var seqs: ClosedRange<UInt64>

    /// Parses a header value; `nil` when it is malformed (the log id must be lowercase, and the
    /// last seq below `UInt64.max`).
    init?(_ value: String) {
        let parts = value.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let log = parts[0]
        guard log.count == 32, log.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }) else {
            return nil
        }
        let range = parts[1].split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard range.count == 2, let first = Self.decimal(range[0]), let last = Self.decimal(range[1]), first <= last, last < UInt64.max else {
            return nil
        }
        self.logID = String(decoding: log, as: UTF8.self)
        self.seqs = first...last
    }

    init(logID: String, seqs: ClosedRange<UInt64>) {
        self.logID = logID
        self.seqs = seqs
    }

    /// The number of sequence numbers in the range (at least 1).
    var count: UInt64 { seqs.upperBound - seqs.lowerBound &+ 1 }

    /// An unsigned decimal without sign, spaces or leading zeros, that fits in 64 bits.
    static func decimal(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 20, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        guard digits.count == 1 || digits.first != UInt8(ascii: "0") else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }
}
