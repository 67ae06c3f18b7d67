import ArgumentParser

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "verify", abstract: "(under construction)")

    func run() async throws {
        throw ValidationError("'spool verify' is under construction")
    }
}
