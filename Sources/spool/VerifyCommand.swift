import ArgumentParser
import Spool

/// `spool verify DIR`: checks every block.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every block of a log; exit non-zero if anything is corrupt.",
        discussion: """
            Prints segments, blocks, records, bytes on disk, uncompressed bytes, the compression \
            ratio and every corrupt range. Opening applies the usual recovery: a damaged last \
            block of the active segment is cut and reported as a torn tail (what a killed \
            writer leaves; a power loss or the disk can leave one too), not as corruption.
            """)

    @OptionGroup var log: LogDirectory

    func run() throws {
        let eventLog = try log.open(reportingRecovery: false)
        defer { try? eventLog.close() }
        let report = try eventLog.verify()
        var lines = [String]()
        lines.append("log        \(eventLog.id)")
        lines.append("segments   \(report.segments)")
        lines.append("blocks     \(report.blocks)")
        lines.append("records    \(report.records)")
        lines.append("on disk    \(report.diskBytes) bytes (\(formatBytes(report.diskBytes)))")
        lines.append("raw        \(report.rawBytes) bytes (\(formatBytes(report.rawBytes)))")
        lines.append("ratio      \(String(format: "%.2f", report.compressionRatio))")
        if let torn = report.recovery.tornTail {
            lines.append("torn tail  \(torn.segment): cut \(torn.bytes) bytes at offset \(torn.offset) (a write interrupted by a crash, or a last block damaged on disk)")
        }
        for file in report.recovery.ignoredFiles { lines.append("ignored    \(file) (not a log file)") }
        for name in report.recovery.resetConsumers { lines.append("reset      consumer \(name): its offset file was unreadable; it restarts at the oldest stored record") }
        for notice in report.otherNotices { lines.append("notice     \(notice)") }
        for notice in report.corrupt { lines.append("CORRUPT    \(notice)") }
        lines.append(report.isClean ? "ok: no corruption" : "FAILED: \(report.corrupt.count) corrupt ranges, \(report.corrupt.reduce(0) { $0 + $1.count }) records lost")
        print(lines.joined(separator: "\n"))
        try eventLog.close()
        if !report.isClean { throw ExitCode(1) }
    }
}
