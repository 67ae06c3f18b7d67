import ArgumentParser
import Spool

/// `spool stat DIR`: identity, segments, records, consumers.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print a log's identity, segments, records, compression ratio and consumers.")

    @OptionGroup var log: LogDirectory

    func run() throws {
        let snapshot = try log.snapshot()
        defer { snapshot.close() }
        let summary = try snapshot.summary()
        var lines = [String]()
        lines.append("log         \(summary.id)")
        lines.append("directory   \(snapshot.directory)")
        lines.append("records     \(summary.records) stored, seqs \(summary.firstSeq)..<\(summary.nextSeq)")
        lines.append("segments    \(summary.segments.count), \(summary.diskBytes) bytes (\(formatBytes(summary.diskBytes)))")
        lines.append("raw         \(summary.rawBytes) bytes, ratio \(String(format: "%.2f", summary.compressionRatio))")
        for segment in summary.segments {
            let end = segment.baseSeq + segment.records
            lines.append("  \(segment.name)  \(segment.bytes) bytes  \(segment.blocks) blocks  seqs \(segment.baseSeq)..<\(end)")
        }
        let names = snapshot.consumerNames
        lines.append("consumers   \(names.count)")
        for name in names {
            guard let offset = snapshot.consumerOffsets[name], let lag = snapshot.lag(ofConsumer: name) else { continue }
            let behind = offset < summary.firstSeq ? summary.firstSeq - offset : 0
            var line = "  \(name)  offset \(offset)  lag \(lag.records) records (\(formatBytes(lag.bytes)))"
            if behind > 0 { line += "  dropped \(behind) (deleted by the cap before it read them)" }
            lines.append(line)
        }
        try Output.write(lines.joined(separator: "\n") + "\n")
    }
}
