import ArgumentParser
import Spool

/// `spool stat DIR`: identity, segments, records, consumers.
struct StatCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stat",
        abstract: "Print a log's identity, segments, records, compression ratio and consumers (for a group: each writer's log, then the totals).")

    @OptionGroup var log: LogDirectory

    @OptionGroup var output: JSONOption

    func run() throws {
        guard let writers = try log.groupWriters() else {
            let stat = try Self.stat(of: log, writer: nil)
            try output.json ? Output.writeJSON(stat) : Output.write(stat.lines.joined(separator: "\n") + "\n")
            return
        }
        let stats = try writers.map { try Self.stat(of: $0.log, writer: $0.name) }
        let total = GroupStat.Total(writers: stats.count, records: stats.reduce(0) { $0 + $1.records },
                                    diskBytes: stats.reduce(0) { $0 + $1.diskBytes })
        let group = GroupStat(group: log.directory, writers: stats, total: total)
        try output.json ? Output.writeJSON(group) : Output.write(group.lines.joined(separator: "\n") + "\n")
    }

    private static func stat(of log: LogDirectory, writer: String?) throws -> LogStat {
        let snapshot = try log.snapshot()
        defer { snapshot.close() }
        return try LogStat(snapshot, writer: writer)
    }
}
