import ArgumentParser

struct AppendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "append", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool append' is under construction")
    }
}
