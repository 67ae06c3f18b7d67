import ArgumentParser
import Spool

/// `spool verify DIR`: checks every block.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every block of a log; exit 1 if anything is corrupt, 2 if it could not be checked.",
        discussion: """
            Prints segments, blocks, records, bytes on disk, uncompressed bytes, the compression \
            ratio and every corrupt range. Reads a snapshot: no file of the log changes (an \
            empty LOCK is made if there is none). A damaged last block of the active segment is \
            reported as a torn tail (what a killed writer leaves; a power loss or the disk can \
            leave one too) that the next writing open cuts, not as corruption.
            """)

    @OptionGroup var log: LogDirectory

    /// Exit 1 means corruption was found; 2, that the log could not be checked (locked by a
    /// writer, unreadable, an I/O error): a script can tell "damaged" from "not checked".
    func run() throws {
        do {
            try check()
        } catch let error as ExitCode {
            throw error
        } catch let error as ValidationError {
            // Raised while opening (not a log, --dir naming a file): the log could not be checked.
            Output.error("Error: \(error.message)")
            throw ExitCode(2)
        } catch {
            Output.error("Error: \(error)")
            // Damage that stops even the opening (META and every segment header unreadable) is
            // corruption found, not a failure to check.
            throw ExitCode((error as? SpoolError)?.code == .corrupt ? 1 : 2)
        }
    }

    private func check() throws {
        let snapshot = try log.snapshot(reportingRecovery: false)
        defer { snapshot.close() }
        let report = try snapshot.verify()
        var lines = [String]()
        lines.append("log        \(snapshot.id)")
        lines.append("segments   \(report.segments)")
        lines.append("blocks     \(report.blocks)")
        lines.append("records    \(report.records)")
        lines.append("on disk    \(report.diskBytes) bytes (\(formatBytes(report.diskBytes)))")
        lines.append("raw        \(report.rawBytes) bytes (\(formatBytes(report.rawBytes)))")
        lines.append("ratio      \(String(format: "%.2f", report.compressionRatio))")
        for line in LogDirectory.recoveryLines(report.recovery) { lines.append("recovery   \(line)") }
        for file in report.recovery.ignoredFiles { lines.append("ignored    \(terminalSafe(file)) (not a log file)") }
        for notice in report.otherNotices { lines.append("notice     \(notice)") }
        for notice in report.corrupt { lines.append("CORRUPT    \(notice)") }
        lines.append(report.isClean ? "ok: no corruption"
                     : "FAILED: \(report.corrupt.count) corrupt ranges, \(report.corrupt.reduce(0) { $0 + $1.count }) records lost, \(report.recovery.setAsideSegments.count) misfit segments")
        try Output.write(lines.joined(separator: "\n") + "\n")
        if !report.isClean { throw ExitCode(1) }
    }
}
