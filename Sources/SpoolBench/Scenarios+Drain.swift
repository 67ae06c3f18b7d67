import Spool

/// The Spool drains measured: batch size and commit mode.
private let drains: [(Int, CommitMode)] = [(50, .durable), (500, .durable), (50, .fast)]

extension Context {
    /// Draining a backlog — read a batch, build the request body, commit — against
    /// SQLite's select-oldest-50 / build JSON / delete, and the bytes each store took.
    func drainRows() async throws -> [Row] {
        let spool = self.spool
        let events = self.events
        let count = options.drainEvents
        var spoolSteps = [Step]()
        for (batch, mode) in drains {
            spoolSteps.append(Step(key: "Spool drain \(batch) \(mode)") { directory in
                try await blocking {
                    let (run, bytes) = try spool.drain(batch: batch, mode: mode, count: count, directory: directory)
                    var result = run
                    result.storedBytes = bytes
                    return result
                }
            })
        }
        var baselineSteps = [Step]()
        if let baseline {
            for mode in BaselineDrain.allCases {
                baselineSteps.append(Step(key: "\(baseline.name) drain \(mode.label)") { directory in
                    try await blocking {
                        let (run, bytes) = try baseline.drain(mode, batch: 50, events: events, count: count, directory: directory)
                        var result = run
                        result.storedBytes = bytes
                        return result
                    }
                })
            }
        }
        progress("drain: \(count) events per measurement")
        let best = try await alternate(spoolSteps, baselineSteps)

        var rows = [Row]()
        for (batch, mode) in drains {
            let spoolRun = best["Spool drain \(batch) \(mode)"]!
            let key = "read+encode+commit(\(mode)), batch \(batch)"
            guard let baseline else {
                rows.append(Row(group: "drain", scenario: key, spool: .events(spoolRun)))
                continue
            }
            // The goals are on the fast commit: a power loss can only roll it back, re-delivering
            // records whose event ids make the repeat harmless, so nothing is lost — the issue's
            // allowance ("an offset commit need not cost an fsync each time"). The durable rows
            // show the cost of one fdatasync per batch, the same count as SQLite FULL's.
            for base in BaselineDrain.allCases {
                let run = best["\(baseline.name) drain \(base.label)"]!
                let goal: Goal? = batch == 50 && mode == .fast ? .atLeast(base == .full ? 6 : 2) : nil
                rows.append(Row(group: "drain", scenario: key, spool: .events(spoolRun),
                                baseline: "\(baseline.name) \(base.label): select 50+JSON+delete", baselineFigure: .events(run),
                                goal: goal))
            }
        }

        let spoolBytes = Double(best["Spool drain 50 durable"]!.storedBytes!)
        let perEvent = Figure(spoolBytes / Double(count), "B/event")
        let eventBytes = Double((0..<count).reduce(0) { $0 + events[cycling: $1].count })
        if let baseline, let baseBytes = best["\(baseline.name) drain \(BaselineDrain.full.label)"]?.storedBytes {
            rows.append(Row(group: "footprint", scenario: "bytes on disk", spool: perEvent,
                            baseline: baseline.name, baselineFigure: Figure(Double(baseBytes) / Double(count), "B/event"),
                            percent: true, goal: .atMost(0.15)))
        }
        rows.append(Row(group: "footprint", scenario: "bytes on disk", spool: perEvent,
                        baseline: "the events' own bytes", baselineFigure: Figure(eventBytes / Double(count), "B/event"), percent: true))
        // Cold recompression (FORMAT.md §2.1): the same events, their sealed segments rewritten.
        let coldDirectory = try scratch.fresh("cold")
        defer { scratch.remove(coldDirectory) }
        let cold = try await blocking { try spool.coldBytes(count: count, directory: coldDirectory) }
        let coldPerEvent = Figure(Double(cold.total) / Double(count), "B/event")
        // The active segment's size goes in the note: a row's scenario is its key against a baseline.
        rows.append(Row(group: "footprint", scenario: "bytes on disk, sealed segments cold-recompressed (1 MiB segments; the active one as written)",
                        spool: Figure(coldPerEvent.value, "B/event", note: "the active one \(cold.active) B"), baseline: "Spool as written", baselineFigure: perEvent, percent: true))
        if let baseline, let baseBytes = best["\(baseline.name) drain \(BaselineDrain.full.label)"]?.storedBytes {
            rows.append(Row(group: "footprint", scenario: "bytes on disk, sealed segments cold-recompressed", spool: coldPerEvent,
                            baseline: baseline.name, baselineFigure: Figure(Double(baseBytes) / Double(count), "B/event"),
                            percent: true, goal: .atMost(0.08)))
        }
        // A harder level for segments that stay cold long (`ColdCompression(level: 15)`): fewer
        // bytes, for more of the background thread's time, shown against the default's.
        let harderLevel: Int32 = 15
        let harderDirectory = try scratch.fresh("cold-\(harderLevel)")
        defer { scratch.remove(harderDirectory) }
        let harder = try await blocking { try spool.coldBytes(count: count, level: harderLevel, directory: harderDirectory) }
        let harderPerEvent = Figure(Double(harder.total) / Double(count), "B/event")
        if let baseline, let baseBytes = best["\(baseline.name) drain \(BaselineDrain.full.label)"]?.storedBytes {
            rows.append(Row(group: "footprint", scenario: "bytes on disk, cold-recompressed at level \(harderLevel)", spool: harderPerEvent,
                            baseline: baseline.name, baselineFigure: Figure(Double(baseBytes) / Double(count), "B/event"),
                            percent: true, goal: .atMost(0.06)))
        }
        let level = ColdCompression().level
        progress("  cold rewrite of \(count) events: level \(level) \(format(coldPerEvent.value)) B/event in \(format(Double(cold.rewriteNanos) / 1e6)) ms, "
            + "level \(harderLevel) \(format(harderPerEvent.value)) B/event in \(format(Double(harder.rewriteNanos) / 1e6)) ms")
        rows.append(Row(group: "footprint", scenario: "cold rewrite's time at level \(harderLevel)", spool: Figure(Double(harder.rewriteNanos) / 1e6, "ms"),
                        baseline: "the same at level \(level) (the default)", baselineFigure: Figure(Double(cold.rewriteNanos) / 1e6, "ms")))
        rows.append(try await keptUnderCapRow(cold: false))
        rows.append(try await keptUnderCapRow(cold: true))
        return rows
    }

    /// Issue #36's row: the generator's events kept by a log capped at 10 MiB (dropping the
    /// oldest, segments of 1.25 MiB) after ``BenchOptions/capEvents`` were appended, against as
    /// many as 10 MiB holds at the events' own size. An app offline for a week under a cap
    /// keeps this many.
    /// With `cold`, the sealed segments are cold-recompressed between bursts of 10,000 appends
    /// (``SpoolSide/keptUnderCap(maxBytes:count:cold:directory:)``).
    private func keptUnderCapRow(cold: Bool) async throws -> Row {
        let cap = 10 * 1024 * 1024
        let spool = self.spool
        let directory = try scratch.fresh(cold ? "cap-cold" : "cap")
        defer { scratch.remove(directory) }
        let appended = options.capEvents
        let kept = try await blocking { try spool.keptUnderCap(maxBytes: cap, count: appended, cold: cold, directory: directory) }
        let how = cold ? ", cold-recompressed between bursts of 10,000" : ""
        return Row(group: "footprint", scenario: "events kept under a 10 MiB cap (\(appended) appended, oldest dropped\(how))",
                   spool: Figure(Double(kept), "events"), baseline: "10 MiB of the events' own bytes",
                   baselineFigure: Figure(Double(cap) / events.meanSize, "events"))
    }
}
