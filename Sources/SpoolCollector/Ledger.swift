/// The collector's memory of what it recorded: the seqs received per log, and the output file.
///
/// Its calls block on the file: the collector only touches it from its serial dispatch queue,
/// which also fixes the order of the output. Not thread-safe.
struct Ledger {
    private var logs: [String: ReceivedSeqs] = [:]
    /// When each log was last seen, as a count of batches: the least recently seen are
    /// forgotten first.
    private var lastSeen: [String: UInt64] = [:]
    private var batches: UInt64 = 0
    private let maxLogs: Int
    private var output: OutputFile?

    /// - Parameter maxLogs: how many logs' received seqs are kept (``CollectorConfiguration/maxTrackedLogs``).
    init(maxLogs: Int) {
        self.maxLogs = maxLogs
    }

    /// How many logs' received seqs are kept now (at most `maxLogs`).
    var trackedLogs: Int { logs.count }

    /// Opens the output file (see ``OutputFile/init(path:)``).
    mutating func open(path: String) throws {
        output = try OutputFile(path: path)
    }

    /// Records the records of one batch (all from one log) that were not received before, with
    /// one write of the output file. If the write fails, nothing is marked received, so a
    /// retry records them.
    ///
    /// Past `maxLogs` logs, the least recently seen tenth (at least one) is forgotten, so memory
    /// stays bounded whatever number of log ids clients send: a batch re-sent later from a
    /// forgotten log is recorded again.
    ///
    /// - Returns: the new records, in batch order, how many were duplicates, and how many logs
    ///   were forgotten to make room.
    mutating func record(_ records: [ReceivedRecord]) throws -> (fresh: [ReceivedRecord], duplicates: Int, forgotten: Int) {
        guard let logID = records.first?.logID else { return ([], 0, 0) }
        var seqs = logs[logID] ?? ReceivedSeqs()
        let fresh = records.filter { seqs.insert($0.seq) }
        if let output, !fresh.isEmpty {
            var lines = ""
            for record in fresh { lines += record.ndjsonLine }
            try output.append(Array(lines.utf8))
        }
        var forgotten = 0
        if logs[logID] == nil && logs.count >= maxLogs {
            let oldest = lastSeen.sorted { $0.value < $1.value }.prefix(max(1, maxLogs / 10))
            for (id, _) in oldest {
                logs[id] = nil
                lastSeen[id] = nil
            }
            forgotten = oldest.count
        }
        batches += 1
        logs[logID] = seqs
        lastSeen[logID] = batches
        return (fresh, records.count - fresh.count, forgotten)
    }

    /// Syncs and closes the output file, if any. Later calls do nothing.
    mutating func close() throws {
        defer { output = nil }
        try output?.close()
    }
}
