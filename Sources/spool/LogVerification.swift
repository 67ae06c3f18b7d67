import Foundation
import Spool

/// What `spool verify` reports of one log. Its text lines and its `--json` object are both
/// made from this value, so they always agree.
struct LogVerification: Encodable {
    /// A range of seqs a reader cannot return, and why; the seqs are `first_seq..<end_seq`.
    struct Notice: Encodable {
        /// `corrupt`, `dropped`, `missing`, … (ReadNotice.Kind).
        var kind: String
        var firstSeq: UInt64
        var endSeq: UInt64
        var records: UInt64
        var detail: String
        /// The text line's words for it.
        var message: String

        init(_ notice: ReadNotice) {
            kind = notice.kind.rawValue
            firstSeq = notice.range.lowerBound
            endSeq = notice.range.upperBound
            records = notice.count
            detail = notice.detail
            message = notice.description
        }
    }

    /// The writer's name when the log is one writer log of a group; absent for a lone log.
    var writer: String?
    var log: String
    var segments: Int
    var blocks: Int
    var records: UInt64
    var diskBytes: Int64
    var rawBytes: Int64
    var compressionRatio: Double
    /// What recovery found (and the next writing open repairs), in words.
    var recovery: [String]
    /// Files in the directory that are not the log's.
    var ignored: [String]
    var notices: [Notice]
    var corrupt: [Notice]
    /// Segments that do not fit the log's sequence (set aside by the next writing open).
    var misfitSegments: Int
    /// No corruption and no misfit segment: what exit status 0 says.
    var clean: Bool

    init(_ report: VerifyReport, log id: LogID, writer: String? = nil) {
        self.writer = writer
        log = "\(id)"
        segments = report.segments
        blocks = report.blocks
        records = report.records
        diskBytes = report.diskBytes
        rawBytes = report.rawBytes
        compressionRatio = report.compressionRatio
        recovery = LogDirectory.recoveryLines(report.recovery)
        ignored = report.recovery.ignoredFiles
        notices = report.otherNotices.map(Notice.init)
        corrupt = report.corrupt.map(Notice.init)
        misfitSegments = report.recovery.setAsideSegments.count
        clean = report.isClean
    }

    /// The text `spool verify` prints, one string a line.
    var lines: [String] {
        var lines = [String]()
        lines.append("log        \(log)")
        lines.append("segments   \(segments)")
        lines.append("blocks     \(blocks)")
        lines.append("records    \(records)")
        lines.append("on disk    \(diskBytes) bytes (\(formatBytes(diskBytes)))")
        lines.append("raw        \(rawBytes) bytes (\(formatBytes(rawBytes)))")
        lines.append("ratio      \(String(format: "%.2f", compressionRatio))")
        for line in recovery { lines.append("recovery   \(line)") }
        for file in ignored { lines.append("ignored    \(terminalSafe(file)) (not a log file)") }
        for notice in notices { lines.append("notice     \(notice.message)") }
        for notice in corrupt { lines.append("CORRUPT    \(notice.message)") }
        lines.append(clean ? "ok: no corruption"
                     : "FAILED: \(corrupt.count) corrupt ranges, \(corrupt.reduce(0) { $0 + $1.records }) records lost, \(misfitSegments) misfit segments")
        return lines
    }
}

/// What `spool verify` reports of a group: each writer log, those that could not be opened,
/// then one verdict for all.
struct GroupVerification: Encodable {
    var group: String
    var writers: [LogVerification]
    /// The writer logs that could not be opened, with the reason: not checked.
    var unopened: [UnopenedWriter]
    /// The writers whose log is not clean, or was too damaged to open.
    var damaged: [String]
    var clean: Bool

    init(group: String, writers: [LogVerification], unopened: [UnopenedWriter] = []) {
        self.group = group
        self.writers = writers
        self.unopened = unopened
        damaged = (writers.filter { !$0.clean }.map { $0.writer ?? "" } + unopened.filter(\.corrupt).map(\.writer)).sorted()
        clean = damaged.isEmpty && unopened.isEmpty
    }

    /// 1 when any writer log is damaged, else 2 when any could not be checked, else nil (0).
    var exitStatus: Int32? {
        !damaged.isEmpty ? 1 : unopened.isEmpty ? nil : 2
    }

    var lines: [String] {
        let count = writers.count + unopened.count
        var lines = ["group      \(group)", "writers    \(count)"]
        lines += writerSections(writers.map { ($0.writer ?? "", $0.lines) })
        for one in unopened { lines.append("writer \(one.writer): not checked: \(one.error)") }
        guard !clean else { return lines + ["ok: no corruption in \(count) writer logs"] }
        var verdict = [String]()
        if !damaged.isEmpty { verdict.append("corruption in \(damaged.count) of \(count) writer logs (\(damaged.joined(separator: ", ")))") }
        let unchecked = unopened.filter { !$0.corrupt }.map(\.writer)
        if !unchecked.isEmpty { verdict.append("\(unchecked.count) could not be checked (\(unchecked.joined(separator: ", ")))") }
        return lines + ["FAILED: " + verdict.joined(separator: "; ")]
    }
}
