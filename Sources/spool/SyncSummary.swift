import Foundation
import SpoolSync

/// What `spool sync` reports when it ends: its text line and its `--json` object are both
/// made from this value, so they always agree.
struct SyncSummary: Encodable {
    /// The writer log, in a group's report; absent otherwise.
    var writer: String?
    /// Records delivered (accepted by the destination and committed).
    var records: Int
    /// Requests those records went in.
    var batches: Int
    /// Bytes of request body in those requests.
    var bytes: Int
    /// Records the destination refused, moved to the dead-letter log.
    var deadLettered: Int
    /// Requests sent, accepted or not.
    var requests: Int
    /// Failed requests sent again.
    var retries: Int
    /// Second copies of slow requests (hedges), counted in `requests` too.
    var hedges: Int
    /// The most requests in flight at once.
    var peakInFlight: Int
    /// Times the adaptive concurrency lowered its limit because the destination showed strain.
    var concurrencyDecreases: Int
    /// Records written and not yet committed when it ended.
    var lag: UInt64
    /// Records skipped because the log cannot read them: lost, recorded and committed past.
    var damaged: Damaged

    /// The records skipped as damaged: how many, and the ranges (the first 100).
    struct Damaged: Encodable {
        struct Range: Encodable {
            var firstSeq: UInt64
            var endSeq: UInt64
            var records: UInt64
            var segment: String
            var reason: String
        }

        var records: UInt64
        var rangeCount: Int
        var ranges: [Range]

        init(_ tally: DamageTally) {
            records = tally.records
            rangeCount = tally.rangeCount
            ranges = tally.ranges.map {
                Range(firstSeq: $0.seqs.lowerBound, endSeq: $0.seqs.upperBound, records: $0.records, segment: $0.segment, reason: $0.reason)
            }
        }
    }

    /// - Parameters: what was delivered (one flush's report, or the counters when they are
    ///   the whole run), and the worker's counters for how.
    init(writer: String? = nil, records: Int, batches: Int, bytes: Int, deadLettered: Int, stats: SyncStats) {
        self.writer = writer
        self.records = records
        self.batches = batches
        self.bytes = bytes
        self.deadLettered = deadLettered
        requests = stats.requests
        retries = stats.retries
        hedges = stats.hedges
        peakInFlight = stats.peakInFlight
        concurrencyDecreases = stats.concurrencyDecreases
        lag = stats.pending
        damaged = Damaged(stats.damaged)
    }

    /// A worker's whole run, from its counters.
    init(writer: String? = nil, _ stats: SyncStats) {
        self.init(writer: writer, records: stats.records, batches: stats.batches, bytes: stats.bytes, deadLettered: stats.deadLettered, stats: stats)
    }

    /// One line: what was delivered, then how: requests sent (accepted or not), failed
    /// requests sent again, hedges (when any), the most requests that were in flight at once,
    /// and how often strain lowered the concurrency (when it did).
    var text: String {
        var text = "sent \(records) records in \(batches) requests (\(formatBytes(Int64(bytes))))"
        if deadLettered > 0 { text += "; \(deadLettered) refused records moved to the dead-letter log" }
        text += "; \(requests) requests made, \(retries) retried\(hedges > 0 ? ", \(hedges) hedged" : ""), up to \(peakInFlight) in flight"
        if concurrencyDecreases > 0 { text += ", lowered \(concurrencyDecreases) times under strain" }
        if damaged.records > 0 {
            let ranges = damaged.ranges.map { "\($0.firstSeq)-\($0.endSeq - 1)" }.joined(separator: ", ")
            text += "; DAMAGED: \(damaged.records) records the log cannot read were skipped (\(ranges)\(damaged.rangeCount > damaged.ranges.count ? ", …" : ""))"
        }
        return text + "\n"
    }
}

/// What `spool sync --group` reports when it ends: each writer log, the ones it could not
/// open, and the totals.
struct GroupSyncSummary: Encodable {
    var writers: [SyncSummary]
    var unopened: [UnopenedWriter]
    var total: SyncSummary

    var text: String {
        var lines = ""
        for one in writers { lines += "writer \(one.writer ?? ""): " + one.text }
        for one in unopened { lines += "writer \(one.writer): not drained: \(one.error)\n" }
        return lines + "total: " + total.text
    }
}

/// `--json`'s object when the run failed: the summary and the error that failed it (exit 1).
struct FailedSync<Summary: Encodable>: Encodable {
    var summary: Summary
    var failure: String?

    enum CodingKeys: String, CodingKey { case failure }

    /// The summary's fields, and `failure` beside them when there is one.
    func encode(to encoder: any Encoder) throws {
        try summary.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(failure, forKey: .failure)
    }
}
