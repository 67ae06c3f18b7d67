import ArgumentParser
import Spool

/// `spool stat DIR`: identity, segments, records, consumers.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print a log's identity, segments, records, compression ratio and consumers.")

    @OptionGroup var log: LogDirectory

    func run() throws {
        let eventLog = try log.open()
        defer { try? eventLog.close() }
        let summary = try eventLog.summary()
        var lines = [String]()
        lines.append("log         \(summary.id)")
        lines.append("directory   \(eventLog.directory)")
        lines.append("records     \(summary.records) stored, seqs \(summary.firstSeq)..<\(summary.nextSeq)")
        lines.append("segments    \(summary.segments.count), \(summary.diskBytes) bytes (\(formatBytes(summary.diskBytes)))")
        lines.append("raw         \(summary.rawBytes) bytes, ratio \(String(format: "%.2f", summary.compressionRatio))")
        for segment in summary.segments {
            let end = segment.baseSeq + segment.records
            lines.append("  \(segment.name)  \(segment.bytes) bytes  \(segment.blocks) blocks  seqs \(segment.baseSeq)..<\(end)")
        }
        let names = eventLog.consumerNames
        lines.append("consumers   \(names.count)")
        for name in names {
            let consumer = try eventLog.consumer(named: name)
            let lag = consumer.lag
            let behind = consumer.committed < summary.firstSeq ? summary.firstSeq - consumer.committed : 0
            var line = "  \(name)  offset \(consumer.committed)  lag \(lag.records) records (\(formatBytes(lag.bytes)))"
            if behind > 0 { line += "  dropped \(behind) (deleted by the cap before it read them)" }
            lines.append(line)
        }
        let stats = eventLog.stats()
        if stats.droppedRecords > 0 || stats.expiredRecords > 0 {
            lines.append("since open  dropped \(stats.droppedRecords), expired \(stats.expiredRecords)")
        }
        if let torn = eventLog.recoveryReport.tornTail {
            lines.append("recovered   cut a torn tail of \(torn.bytes) bytes in \(torn.segment)")
        }
        print(lines.joined(separator: "\n"))
        try eventLog.close()
    }
}
