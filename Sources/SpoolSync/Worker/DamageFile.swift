import Foundation
import Spool

/// The durable record of the damaged ranges a consumer skipped: `deadletter/<consumer>.damaged`
/// beside its dead-letter log, one JSON object a line (FORMAT.md, "Dead letters"), appended and
/// `fsync`ed before the worker commits past the ranges, so the loss is known after the fact.
///
/// Each line: `consumer`, `first_seq`, `end_seq` (half-open), `records`, `segment`, `reason`
/// and `time` (when it was recorded: RFC 3339 in UTC with milliseconds). Never a payload.
///
/// Thread safety: `Sendable`; appends are serialised by the worker. Blocking: call it through
/// `offload`.
struct DamageFile: Sendable {
    /// The file's path.
    let path: String
    /// The mode of a new file.
    let permissions: UInt16

    private struct Line: Encodable {
        var consumer: String
        var firstSeq: UInt64
        var endSeq: UInt64
        var records: UInt64
        var segment: String
        var reason: String
        var time: String

        enum CodingKeys: String, CodingKey {
            case consumer, records, segment, reason, time
            case firstSeq = "first_seq", endSeq = "end_seq"
        }
    }

    /// The file's name beside the dead-letter log of `consumer`.
    static func name(consumer: String) -> String { "\(consumer).damaged" }

    /// Appends one line per range and syncs the file (and its directory when the file is new).
    /// - Throws: `SpoolError` `.io` (or `.diskFull`) naming the path when it cannot be opened (a
    ///   symbolic link is refused), written or synced.
    func append(_ ranges: [DamagedRange], consumer: String, at time: Date) throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let stamp = formatter.string(from: time)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var bytes: [UInt8] = []
        for range in ranges {
            let line = Line(consumer: consumer, firstSeq: range.seqs.lowerBound, endSeq: range.seqs.upperBound,
                            records: range.records, segment: range.segment, reason: range.reason, time: stamp)
            bytes += (try? encoder.encode(line)).map(Array.init) ?? []
            bytes.append(UInt8(ascii: "\n"))
        }
        try DirectoryIO.appendDurably(bytes, to: path, directory: (path as NSString).deletingLastPathComponent, permissions: permissions)
    }
}
