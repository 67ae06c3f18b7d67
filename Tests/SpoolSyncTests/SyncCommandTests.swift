import Foundation
import Testing

/// `spool sync`'s option checks, run as the real binary built beside the tests.
@Suite struct SyncCommandTests {
    /// `.build/<config>/spool`, beside the test bundle.
    static var binary: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("spool").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("spool").path
    }

    /// Runs `spool sync` with `arguments`; returns its exit status (or signal) and standard error.
    func sync(_ arguments: [String]) throws -> (reason: Process.TerminationReason, status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["sync", NSTemporaryDirectory() + "spool-sync-never-opened", "--url", "http://127.0.0.1:9/batch"] + arguments
        let errors = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationReason, process.terminationStatus, text)
    }

    /// Converting these to a `Duration` in milliseconds traps; they must be refused instead.
    @Test(arguments: [["--interval", "inf"], ["--interval", "nan"], ["--interval", "1e300"], ["--interval=-1e300"],
                      ["--timeout", "inf"], ["--timeout", "nan"], ["--timeout", "1e300"], ["--timeout", "0"]])
    func nonFiniteOrHugeSecondsAreAUsageError(arguments: [String]) throws {
        let result = try sync(arguments)
        #expect(result.reason == .exit)
        #expect(result.status == 64)  // EX_USAGE: ArgumentParser's ValidationError
        let option = arguments[0].split(separator: "=")[0]
        #expect(result.stderr.contains("\(option) must be a number of seconds between"))
    }
}
