import Foundation
import Spool

/// What `spool stat` reports of one log. Its text lines and its `--json` object are both made
/// from this value, so they always agree.
struct LogStat: Encodable {
    /// One segment file; its seqs are `first_seq..<end_seq`.
    struct Segment: Encodable {
        var name: String
        var bytes: Int64
        var blocks: Int
        var firstSeq: UInt64
        var endSeq: UInt64
    }

    /// One consumer: its committed offset, what it has left to read, and what the cap deleted
    /// before it read it.
    struct Consumer: Encodable {
        var name: String
        var offset: UInt64
        var lagRecords: UInt64
        var lagBytes: Int64
        var dropped: UInt64
    }

    /// One epoch (FORMAT.md §13): the records from `first_seq` on go out under `id`.
    struct Epoch: Encodable {
        var firstSeq: UInt64
        var id: String
    }

    /// The writer's name when the log is one writer log of a group; absent for a lone log.
    var writer: String?
    var log: String
    var directory: String
    /// Records stored; their seqs are `first_seq..<next_seq`.
    var records: UInt64
    var firstSeq: UInt64
    var nextSeq: UInt64
    var diskBytes: Int64
    var rawBytes: Int64
    /// Raw bytes over bytes on disk (0 for an empty log).
    var compressionRatio: Double
    var segments: [Segment]
    var consumers: [Consumer]
    /// The log's epochs: empty unless its directory was opened for writing somewhere new.
    var epochs: [Epoch]

    /// Reads the snapshot's block headers (no payload).
    /// - Throws: what reading a segment throws.
    init(_ snapshot: LogSnapshot, writer: String? = nil) throws {
        let summary = try snapshot.summary()
        self.writer = writer
        log = "\(summary.id)"
        epochs = try LogEpochs.load(directory: snapshot.directory, base: summary.id).epochs.map { Epoch(firstSeq: $0.firstSeq, id: "\($0.id)") }
        directory = snapshot.directory
        records = summary.records
        firstSeq = summary.firstSeq
        nextSeq = summary.nextSeq
        diskBytes = summary.diskBytes
        rawBytes = summary.rawBytes
        compressionRatio = summary.compressionRatio
        segments = summary.segments.map {
            Segment(name: $0.name, bytes: $0.bytes, blocks: $0.blocks, firstSeq: $0.baseSeq, endSeq: $0.baseSeq + $0.records)
        }
        consumers = snapshot.consumerNames.compactMap { name in
            guard let offset = snapshot.consumerOffsets[name], let lag = snapshot.lag(ofConsumer: name) else { return nil }
            let dropped = offset < summary.firstSeq ? summary.firstSeq - offset : 0
            return Consumer(name: name, offset: offset, lagRecords: lag.records, lagBytes: lag.bytes, dropped: dropped)
        }
    }

    /// The text `spool stat` prints, one string a line.
    var lines: [String] {
        var lines = [String]()
        lines.append("log         \(log)")
        lines.append("directory   \(directory)")
        for epoch in epochs {
            lines.append("epoch       \(epoch.id) from seq \(epoch.firstSeq) (the directory was opened for writing somewhere new)")
        }
        lines.append("records     \(records) stored, seqs \(firstSeq)..<\(nextSeq)")
        lines.append("segments    \(segments.count), \(diskBytes) bytes (\(formatBytes(diskBytes)))")
        lines.append("raw         \(rawBytes) bytes, ratio \(String(format: "%.2f", compressionRatio))")
        for segment in segments {
            lines.append("  \(segment.name)  \(segment.bytes) bytes  \(segment.blocks) blocks  seqs \(segment.firstSeq)..<\(segment.endSeq)")
        }
        lines.append("consumers   \(consumers.count)")
        for consumer in consumers {
            var line = "  \(consumer.name)  offset \(consumer.offset)  lag \(consumer.lagRecords) records (\(formatBytes(consumer.lagBytes)))"
            if consumer.dropped > 0 { line += "  dropped \(consumer.dropped) (deleted by the cap before it read them)" }
            lines.append(line)
        }
        return lines
    }
}

/// What `spool stat` reports of a group: each writer log, those that could not be read, then
/// the totals (of the logs read).
struct GroupStat: Encodable {
    struct Total: Encodable {
        var writers: Int
        var records: UInt64
        var diskBytes: Int64
    }

    var group: String
    var writers: [LogStat]
    var unopened: [UnopenedWriter]
    var total: Total

    var lines: [String] {
        var lines = ["group       \(group)", "writers     \(writers.count + unopened.count)"]
        lines += writerSections(writers.map { ($0.writer ?? "", $0.lines) })
        for one in unopened { lines.append("writer \(one.writer): not read: \(one.error)") }
        lines.append("total       \(total.records) records stored in \(total.writers) writer logs, \(total.diskBytes) bytes (\(formatBytes(total.diskBytes)))")
        return lines
    }
}
