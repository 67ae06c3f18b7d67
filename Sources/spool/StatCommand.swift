import ArgumentParser
import Spool

/// `spool stat DIR`: identity, segments, records, consumers.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print a log's identity, segments, records, compression ratio and consumers (for a group: each writer's log, then the totals).")

    @OptionGroup var log: LogDirectory

    func run() throws {
        guard let writers = try log.groupWriters() else {
            try Output.write(try Self.lines(of: log).text.joined(separator: "\n") + "\n")
            return
        }
        // A group: each writer's log, indented, then the totals.
        var lines = ["group       \(log.directory)", "writers     \(writers.count)"]
        var records: UInt64 = 0
        var bytes: Int64 = 0
        for (name, member) in writers {
            let one = try Self.lines(of: member)
            lines.append("writer \(name)")
            lines += one.text.map { "  " + $0 }
            records += one.records
            bytes += one.diskBytes
        }
        lines.append("total       \(records) records stored in \(writers.count) writer logs, \(bytes) bytes (\(formatBytes(bytes)))")
        try Output.write(lines.joined(separator: "\n") + "\n")
    }

    /// One log's lines, with its stored records and bytes on disk for a group's totals.
    private static func lines(of log: LogDirectory) throws -> (text: [String], records: UInt64, diskBytes: Int64) {
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
        return (lines, UInt64(summary.records), summary.diskBytes)
    }
}
