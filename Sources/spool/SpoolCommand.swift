import ArgumentParser

/// `spool`: the command line for Spool logs. One file per subcommand.
@main
struct SpoolCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spool",
        abstract: "An embedded, durable, append-only event log with a sync worker.",
        subcommands: [
            AppendCommand.self, DumpCommand.self, VerifyCommand.self, StatCommand.self,
            CommitCommand.self, SyncCommand.self, CollectorCommand.self, DemoCommand.self,
            BenchCommand.self, CrashTestCommand.self,
        ]
    )
}
