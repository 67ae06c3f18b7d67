import ArgumentParser

struct CrashTestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "crash-test", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool crash-test' is under construction")
    }
}
