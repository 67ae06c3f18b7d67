import Foundation
import Spool
import SpoolSync

/// What `spool sync` says while it runs, from the worker's counters (``SyncStats``): the
/// progress line of a `--once` drain, and the status lines of a long-running worker.
enum SyncWatch {
    /// Records the worker has dealt with: delivered or moved to the dead-letter log.
    static func done(_ stats: SyncStats) -> Int { stats.records + stats.deadLettered }

    /// Shows `line` (of the records pending at start) until cancelled, reading `stats`
    /// a few times a second; erases it when cancelled.
    static func progress(_ line: ProgressLine, stats: @escaping @Sendable () async -> SyncStats) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                line.update(UInt64(done(await stats())))
                try? await Task.sleep(for: .milliseconds(100))
            }
            line.finish()
        }
    }

    /// Every `interval` until cancelled, a line on standard error when records moved (or
    /// requests failed) since the last one: what a person reading the journal checks.
    static func status(every interval: Duration, stats: @escaping @Sendable () async -> SyncStats) -> Task<Void, Never> {
        Task {
            var last = await stats()
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                let now = await stats()
                let failures = now.failures.values.reduce(0, +)
                guard done(now) != done(last) || failures != last.failures.values.reduce(0, +) else { continue }
                Output.error(statusLine(now, since: last, interval: interval))
                last = now
            }
        }
    }

    /// `spool sync: sent 1200 records (+300 in the last 60s), lag 12 records, 2 retried, 0 failed requests`.
    static func statusLine(_ now: SyncStats, since last: SyncStats, interval: Duration) -> String {
        let failures = now.failures.values.reduce(0, +)
        var text = "spool sync: sent \(now.records) records (+\(now.records - last.records) in the last \(ProgressLine.duration(interval.seconds)))"
        if now.deadLettered > 0 { text += ", \(now.deadLettered) dead-lettered" }
        text += ", lag \(now.pending) records, \(now.retries) retried, \(failures) failures"
        if failures > 0, let error = now.lastError { text += " (last: \(error))" }
        return text
    }
}

extension SyncCommand {
    /// The status lines of a long-running sync (`--status-interval`), or nil when disabled.
    func statusLines(_ stats: @escaping @Sendable () async -> SyncStats) -> Task<Void, Never>? {
        statusInterval > 0 ? SyncWatch.status(every: .seconds(statusInterval), stats: stats) : nil
    }

    /// The summary on standard output: its line, or with `--json` its object (with `failure`,
    /// the error that makes the run exit 1).
    func writeSummary(_ summary: SyncSummary, failure: SyncError?) throws {
        guard output.json else { return try Output.write(summary.text) }
        try Output.writeJSON(FailedSync(summary: summary, failure: failure.map { "\($0)" }))
    }
}
