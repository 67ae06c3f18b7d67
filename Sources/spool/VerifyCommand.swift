import ArgumentParser
import Spool

/// `spool verify DIR`: checks every block.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every block of a log (of every writer log, for a group); exit 1 if anything is corrupt, 2 if it could not be checked.",
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
        guard let writers = try log.groupWriters() else {
            let one = try Self.report(of: log)
            try Output.write(one.lines.joined(separator: "\n") + "\n")
            if !one.clean { throw ExitCode(1) }
            return
        }
        // A group: every writer's log, then one verdict for all of them.
        var lines = ["group      \(log.directory)", "writers    \(writers.count)"]
        var damaged = [String]()
        for (name, member) in writers {
            let one = try Self.report(of: member)
            lines.append("writer \(name)")
            lines += one.lines.map { "  " + $0 }
            if !one.clean { damaged.append(name) }
        }
        lines.append(damaged.isEmpty ? "ok: no corruption in \(writers.count) writer logs"
                     : "FAILED: corruption in \(damaged.count) of \(writers.count) writer logs (\(damaged.joined(separator: ", ")))")
        try Output.write(lines.joined(separator: "\n") + "\n")
        if !damaged.isEmpty { throw ExitCode(1) }
    }

    /// One log's report lines and whether it is clean.
    private static func report(of log: LogDirectory) throws -> (lines: [String], clean: Bool) {
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
        return (lines, report.isClean)
    }
}
