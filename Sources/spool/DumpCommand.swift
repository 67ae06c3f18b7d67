import ArgumentParser

struct DumpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "dump", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool dump' is under construction")
    }
}
