import ArgumentParser
import Spool

/// `spool stat DIR`: identity, segments, records, consumers.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print a log's identity, segments, records, compression ratio and consumers (for a group: each writer's log, then the totals; exit 1 if a writer log could not be read).")

    @OptionGroup var log: LogDirectory

    @OptionGroup var output: JSONOption

    func run() throws {
        guard let writers = try log.groupWriters() else {
            let stat = try Self.stat(of: log, writer: nil)
            try output.json ? Output.writeJSON(stat) : Output.write(stat.lines.joined(separator: "\n") + "\n")
            return
        }
        // Every writer log: one that cannot be read is named with its reason (exit 1), and the
        // others are still reported.
        let (stats, unopened) = eachWriterLog(writers) { try Self.stat(of: $1, writer: $0) }
        let total = GroupStat.Total(writers: stats.count, records: stats.reduce(0) { $0 + $1.records },
                                    diskBytes: stats.reduce(0) { $0 + $1.diskBytes })
        let group = GroupStat(group: log.directory, writers: stats, unopened: unopened, total: total)
        try output.json ? Output.writeJSON(group) : Output.write(group.lines.joined(separator: "\n") + "\n")
        if !unopened.isEmpty { throw ExitCode(1) }
    }

    private static func stat(of log: LogDirectory, writer: String?) throws -> LogStat {
        let snapshot = try log.snapshot()
        defer { snapshot.close() }
        return try LogStat(snapshot, writer: writer)
    }
}
