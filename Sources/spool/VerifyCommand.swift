import ArgumentParser
import Spool

/// `spool verify DIR`: checks every block.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every block of a log (of every writer log, for a group); exit 1 if anything is corrupt, 2 if anything could not be checked.",
        discussion: """
            Prints segments, blocks, records, bytes on disk, uncompressed bytes, the compression \
            ratio and every corrupt range. Reads a snapshot: it takes no lock and creates or \
            changes no file, so it runs beside a writer. A damaged last block of the active segment is \
            reported as a torn tail (what a killed writer leaves; a power loss or the disk can \
            leave one too) that the next writing open cuts, not as corruption.
            """)

    @OptionGroup var log: LogDirectory

    @OptionGroup var output: JSONOption

    @OptionGroup var progress: ProgressOption

    /// Exit 1 means corruption was found; 2, that the log could not be checked (locked by a
    /// writer, unreadable, an I/O error): a script can tell "damaged" from "not checked". In a
    /// group, damage in any writer log wins over a writer log that could not be checked.
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
            let one = try report(of: log, writer: nil)
            try output.json ? Output.writeJSON(one) : Output.write(one.lines.joined(separator: "\n") + "\n")
            if !one.clean { throw ExitCode(1) }
            return
        }
        // A group: every writer's log (one that cannot be opened is named with its reason, and
        // the others are still checked), then one verdict for all of them.
        let (reports, unopened) = eachWriterLog(writers) { try report(of: $1, writer: $0) }
        let group = GroupVerification(group: log.directory, writers: reports, unopened: unopened)
        try output.json ? Output.writeJSON(group) : Output.write(group.lines.joined(separator: "\n") + "\n")
        if let status = group.exitStatus { throw ExitCode(status) }
    }

    /// One log's report, with a progress line while its blocks are read.
    private func report(of log: LogDirectory, writer: String?) throws -> LogVerification {
        let snapshot = try log.snapshot(reportingRecovery: false)
        defer { snapshot.close() }
        let first = snapshot.firstSeq
        let line = progress.line("verify" + (writer.map { " \($0)" } ?? ""), unit: "records", total: snapshot.endSeq - first)
        let report = try snapshot.verify { line.update($0 + 1 - first) }
        line.finish()
        return LogVerification(report, log: snapshot.id, writer: writer)
    }
}
