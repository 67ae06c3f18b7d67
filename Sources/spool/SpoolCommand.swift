import ArgumentParser
import Foundation
import Spool

/// `spool`: the command line for Spool logs. One file per subcommand.
@main
struct SpoolCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spool",
        abstract: "An embedded, durable, append-only event log with a sync worker.",
        subcommands: [
            AppendCommand.self, DumpCommand.self, VerifyCommand.self, StatCommand.self,
            CommitCommand.self, CompactCommand.self, SyncCommand.self, CollectorCommand.self, DemoCommand.self,
            BenchCommand.self, CrashTestCommand.self,
        ]
    )

    /// Runs the chosen command. The synchronous ones (append, dump, verify, stat, commit,
    /// crash-test) open logs, fsync and wait on child processes: they run on a Dispatch thread,
    /// never on one of the cooperative pool's few threads, which the async parts they start
    /// (crash-test's collector, say) need.
    static func main() async {
        var parsed: (any ParsableCommand.Type)?
        do {
            let command = try parseAsRoot()
            parsed = type(of: command)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                let box = UncheckedCommand(command: command)
                try await offload { try box.run() }
            }
        } catch let error as ValidationError where parsed != nil {
            // Thrown by a command's run (a directory that is not a log, a consumer the log does
            // not have): still a usage error (64), but ArgumentParser would print the root
            // command's usage under it; point to the command's own help instead.
            let name = parsed?.configuration.commandName ?? "spool"
            Output.error("Error: \(error.message)\nSee 'spool \(name) --help'.")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        } catch {
            exit(withError: error)
        }
    }
}

/// A parsed synchronous command handed to the thread that runs it; only that thread uses it.
private final class UncheckedCommand: @unchecked Sendable {
    var command: any ParsableCommand
    init(command: any ParsableCommand) { self.command = command }
    func run() throws { try command.run() }
}
