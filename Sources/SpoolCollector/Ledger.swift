/// The collector's memory of what it recorded: the seqs received per log, and the output file.
///
/// Its calls block on the file: the collector only touches it from its serial dispatch queue,
/// which also fixes the order of the output. Not thread-safe.
struct Ledger {
    private var logs: [String: ReceivedSeqs] = [:]
    private var output: OutputFile?

    init() {}

    /// Opens the output file (see ``OutputFile/init(path:)``).
    mutating func open(path: String) throws {
        output = try OutputFile(path: path)
    }

    /// Records the records of one batch (all from one log) that were not received before, with
    /// one write of the output file. If the write fails, nothing is marked received, so a
    /// retry records them.
    ///
    /// - Returns: the new records, in batch order, and how many were duplicates.
    mutating func record(_ records: [ReceivedRecord]) throws -> (fresh: [ReceivedRecord], duplicates: Int) {
        guard let logID = records.first?.logID else { return ([], 0) }
        var seqs = logs[logID] ?? ReceivedSeqs()
        let fresh = records.filter { seqs.insert($0.seq) }
        if let output, !fresh.isEmpty {
            var lines = ""
            for record in fresh { lines += record.ndjsonLine }
            try output.append(Array(lines.utf8))
        }
        logs[logID] = seqs
        return (fresh, records.count - fresh.count)
    }

    /// Syncs and closes the output file, if any. Later calls do nothing.
    mutating func close() throws {
        defer { output = nil }
        try output?.close()
    }
}
