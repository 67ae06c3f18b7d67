import ArgumentParser

struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "demo", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool demo' is under construction")
    }
}
