import ArgumentParser

struct StatCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "stat", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool stat' is under construction")
    }
}
