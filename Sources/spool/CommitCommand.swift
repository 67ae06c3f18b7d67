import ArgumentParser

struct CommitCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "commit", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool commit' is under construction")
    }
}
