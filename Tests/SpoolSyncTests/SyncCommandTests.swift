import Foundation
import Testing
import Spool

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
    /// (`url`: nil for no `--url`, when `arguments` name another destination.)
    func sync(_ arguments: [String], directory: String = NSTemporaryDirectory() + "spool-sync-never-opened",
              url: String? = "http://127.0.0.1:9/batch") throws -> (reason: Process.TerminationReason, status: Int32, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["sync", directory] + (url.map { ["--url", $0] } ?? []) + arguments
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

    /// `--hedge` takes `on` or `off` only (issue #34).
    @Test func anUnknownHedgeSettingIsAUsageError() throws {
        let result = try sync(["--hedge", "sometimes"])
        #expect(result.reason == .exit)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--hedge"), "\(result.stderr)")
    }

    /// A malformed `--pubsub-topic` is a usage error (64, not 1) naming the form it must have,
    /// found before anything is opened (issue #33).
    @Test func aMalformedPubSubTopicIsAUsageError() throws {
        let result = try sync(["--pubsub-topic", "topics/t"], url: nil)
        #expect(result.reason == .exit)
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains(#"must read projects/<project>/topics/<topic>, not "topics/t""#), "\(result.stderr)")
    }

    /// Credentials in `--url` are sent as Basic auth (decoded, RFC 7617), and the password is
    /// printed nowhere (issue #21, item 11).
    @Test func credentialsInTheURLAreSentAsBasicAuthAndNeverPrinted() throws {
        let directory = NSTemporaryDirectory() + "spool-sync-credentials-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try withEventLog(directory: directory) { log in _ = try log.appendBlocking(Array("{}".utf8), durability: .synced) }
        let server = try RedirectingServer(status: 307)
        defer { server.stop() }
        let result = try sync(["--once", "--create", "--consumer", "up"], directory: directory,
                              url: "http://alice:s3cr%40t@127.0.0.1:\(server.port)/moved")
        #expect(result.status == 0, "\(result.stderr)")
        let heads = server.requestHeads
        #expect(heads.count == 1)
        let expected = "Basic " + Data("alice:s3cr@t".utf8).base64EncodedString()
        #expect(heads.allSatisfy { $0.lowercased().contains("authorization: \(expected.lowercased())") }, "\(heads)")
        #expect(!result.stderr.contains("s3cr"))

        let refused = try sync(["--once"], url: "ftp://alice:s3cr%40t@127.0.0.1/")
        #expect(refused.status == 64 && !refused.stderr.contains("s3cr"), "\(refused.stderr)")
    }
}
