extension Context {
    /// Opening a log whose last block is torn, at growing sizes: the time must stay flat
    /// (recovery reads the tail, not the whole log). Each size is compared with the smallest.
    func openRows() async throws -> [Row] {
        let spool = self.spool
        var rows = [Row]()
        var smallest: Figure?
        for size in options.openSizes.sorted() {
            let directory = try scratch.fresh("open")
            let (nanos, bytes) = try await blocking { try spool.openAfterTear(bytes: size, repeats: 3, directory: directory) }
            scratch.remove(directory)
            let figure = Figure(Double(nanos) / 1e6, "ms")
            progress("  open after a torn tail, \(format(Double(bytes) / 1_048_576)) MiB: \(format(figure.value)) ms")
            let scenario = "open, torn tail, \(format(Double(bytes) / 1_048_576)) MiB"
            if let smallest {
                rows.append(Row(group: "open", scenario: scenario, spool: figure, baseline: "the smallest log", baselineFigure: smallest))
            } else {
                rows.append(Row(group: "open", scenario: scenario, spool: figure))
                smallest = figure
            }
        }
        return rows
    }

    /// Peak resident memory while a backlog is appended and the log reopened over it.
    func memoryRows() async throws -> [Row] {
        let spool = self.spool
        let count = options.backlogEvents
        let directory = try scratch.fresh("backlog")
        let memory = try await blocking { try spool.backlogPeakMemory(count: count, directory: directory) }
        scratch.remove(directory)
        guard let memory else { return [] }
        progress("  backlog of \(count) events: peak RSS \(format(Double(memory.peak) / 1_048_576)) MiB")
        return [
            Row(group: "footprint", scenario: "peak RSS growth, \(count)-event backlog",
                spool: Figure(Double(memory.growth) / 1_048_576, "MiB")),
        ]
    }
}
