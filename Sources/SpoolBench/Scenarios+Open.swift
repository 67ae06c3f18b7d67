extension Context {
    /// Opening a log whose last block is torn, at growing sizes: the time must stay flat
    /// (recovery reads the active segment, not the whole log). Each size is compared with the
    /// smallest. Every log's active segment holds the same ~1 MiB, since its size, not the log's,
    /// sets the time; a last row opens a full active segment, the most any open reads
    /// (``BenchOptions/openFullActiveSegment``).
    func openRows() async throws -> [Row] {
        let spool = self.spool
        var rows = [Row]()
        var smallest: Figure?
        // A window the fill can land in: small steps store ~17 KB, and a segment rolls at its size.
        let segmentSize = Int64(spool.configuration.segmentSize)
        let slack = min(256 << 10, segmentSize / 8)
        let activeBytes = min(Int64(min(1 << 20, options.openSizes.min() ?? (1 << 20))), segmentSize / 2)
        let fullActive = (bytes: Int(segmentSize), active: segmentSize - slack)
        let cases = options.openSizes.sorted().map { (bytes: $0, active: activeBytes) }
            + (options.openFullActiveSegment ? [fullActive] : [])
        for (index, (size, activeTarget)) in cases.enumerated() {
            let directory = try scratch.fresh("open")
            let (nanos, bytes, active) = try await blocking {
                try spool.openAfterTear(bytes: size, activeBytes: activeTarget, slack: slack, repeats: 3, directory: directory)
            }
            scratch.remove(directory)
            // The median is the figure; every open is printed in order, so an outlier shows which
            // it is, and the active segment's size, which is what recovery reads.
            let activeMiB = format(Double(active) / 1_048_576)
            let figure = Figure(Double(nanos.sorted()[nanos.count / 2]) / 1e6, "ms", note: "active segment \(activeMiB) MiB")
            progress("  open after a torn tail, \(format(Double(bytes) / 1_048_576)) MiB (active segment \(activeMiB) MiB): \(format(figure.value)) ms "
                + "(each open: \(nanos.map { format(Double($0) / 1e6) }.joined(separator: ", ")) ms)")
            let worst = options.openFullActiveSegment && index == cases.count - 1
            let scenario = worst ? "open, torn tail, full active segment" : "open, torn tail, \(format(Double(bytes) / 1_048_576)) MiB"
            if let smallest {
                rows.append(Row(group: "open", scenario: scenario, spool: figure, baseline: "the smallest log", baselineFigure: smallest))
            } else {
                rows.append(Row(group: "open", scenario: scenario, spool: figure))
                smallest = figure
            }
        }
        return rows
    }

    /// Peak resident memory while a backlog is appended and the log reopened over it, for the
    /// backlog asked for and one a tenth of its size, so the table shows whether it stays flat.
    func memoryRows() async throws -> [Row] {
        let spool = self.spool
        let large = options.backlogEvents
        let small = max(1, large / 10)
        var measured: [(count: Int, appending: Double, reopening: Double)] = []
        for count in [small, large] {
            let directory = try scratch.fresh("backlog")
            let memory = try await blocking { try spool.backlogPeakMemory(count: count, directory: directory) }
            scratch.remove(directory)
            guard let memory else { return [] }
            let mib = (Double(memory.appending) / 1_048_576, Double(memory.reopening) / 1_048_576)
            progress("  backlog of \(count) events: peak RSS growth \(format(mib.0)) MiB appending, \(format(mib.1)) MiB reopening")
            measured.append((count, mib.0, mib.1))
        }
        let (first, last) = (measured[0], measured[1])
        return [
            Row(group: "footprint", scenario: "peak RSS growth appending a \(last.count)-event backlog",
                spool: Figure(last.appending, "MiB"), baseline: "the same, \(first.count) events",
                baselineFigure: Figure(first.appending, "MiB")),
            Row(group: "footprint", scenario: "peak RSS growth reopening over a \(last.count)-event backlog",
                spool: Figure(last.reopening, "MiB"), baseline: "the same, \(first.count) events",
                baselineFigure: Figure(first.reopening, "MiB")),
        ]
    }
}

extension Context {
    /// Bytes on disk per event when events trickle in one at a time at `written` (one block
    /// each): Spool with a trained dictionary against Spool without one and against the
    /// baseline storing the same events one per transaction.
    func trickleRows() async throws -> [Row] {
        let events = self.events
        let count = options.trickleEvents
        let trainAfter = options.trickleTrainAfter
        let directory = try scratch.fresh("trickle")
        let figures = try await blocking { try trickleBytesPerEvent(events: events, count: count, trainAfter: trainAfter, directory: directory) }
        scratch.remove(directory)
        progress("  trickle of \(count) events: \(format(figures.noDictionary)) B/event without a dictionary, "
            + "\(format(figures.trainedDictionary)) with one (trained after \(figures.warmUpEvents) events, \(figures.dictionaryFileBytes) B file)")
        let scenario = "trickle \(count), written, 1/block"
        let trained = Figure(figures.trainedDictionary, "B/event", note: "trained dictionary")
        var rows = [
            Row(group: "trickle", scenario: scenario, spool: trained,
                baseline: "Spool, no dictionary", baselineFigure: Figure(figures.noDictionary, "B/event"), percent: true, goal: .atMost(0.25)),
        ]
        if let baseline {
            let base = try scratch.fresh("trickle-baseline")
            let bytes = try await blocking { try baseline.trickle(events: events, count: count, directory: base) }
            scratch.remove(base)
            rows.append(Row(group: "trickle", scenario: scenario, spool: trained,
                            baseline: "\(baseline.name) NORMAL, 1/txn, closed", baselineFigure: Figure(bytes.perEvent, "B/event"),
                            percent: true, goal: .atMost(0.20)))
            rows.append(Row(group: "trickle", scenario: scenario, spool: trained,
                            baseline: "\(baseline.name) NORMAL, 1/txn, open (db + WAL)", baselineFigure: Figure(bytes.perEventWhileOpen, "B/event"),
                            percent: true))
        }
        rows.append(Row(group: "trickle", scenario: scenario + ", encrypted",
                        spool: Figure(figures.trainedDictionaryEncrypted, "B/event", note: "the clear log's dictionary, provided"),
                        baseline: "Spool, trained dictionary, clear", baselineFigure: trained, percent: true))
        return rows
    }
}
