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
    /// Records written and not yet committed when it ended.
    var lag: UInt64

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
        lag = stats.pending
    }

    /// A worker's whole run, from its counters.
    init(writer: String? = nil, _ stats: SyncStats) {
        self.init(writer: writer, records: stats.records, batches: stats.batches, bytes: stats.bytes, deadLettered: stats.deadLettered, stats: stats)
    }

    /// One line: what was delivered, then how: requests sent (accepted or not), failed
    /// requests sent again, hedges (when any), and the most requests that were in flight at once.
    var text: String {
        var text = "sent \(records) records in \(batches) requests (\(formatBytes(Int64(bytes))))"
        if deadLettered > 0 { text += "; \(deadLettered) refused records moved to the dead-letter log" }
        text += "; \(requests) requests made, \(retries) retried\(hedges > 0 ? ", \(hedges) hedged" : ""), up to \(peakInFlight) in flight"
        return text + "\n"
    }
}

/// What `spool sync --group` reports when it ends: each writer log, the ones it could not
/// open, and the totals.
struct GroupSyncSummary: Encodable {
    struct Unopened: Encodable {
        var writer: String
        var error: String
    }

    var writers: [SyncSummary]
    var unopened: [Unopened]
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
