import Foundation
import Logging
import Spool
import Synchronization
import Testing
@testable import SpoolCollector

/// The token file re-read while the collector runs (issue #33): a file rewritten in place
/// (`echo new > tokens` truncates it first) must never leave the collector with no token.
@Suite struct TokenFileTests {
    @Test func anEmptiedTokenFileKeepsTheTokensInForceAndIsLogged() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-tokens-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("tokens").path
        try "alpha-token-000001\n".write(toFile: path, atomically: true, encoding: .utf8)
        let warnings = WarningLog()
        let tokens = TokenFile(path: path, logger: Logger(label: "test") { _ in warnings })
        #expect(try tokens.load() == 1)
        tokens.watch(every: .milliseconds(10))
        defer { tokens.stopWatching() }

        // Truncated in place, as a shell's `>` does before it writes.
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        #expect(await eventually { warnings.messages.contains { $0.contains("could not be re-read") } }, "the watcher re-read the empty file")
        #expect(warnings.messages.allSatisfy { !$0.contains("alpha-token") })
        #expect(tokens.authorizes("Bearer alpha-token-000001"), "an empty file keeps the tokens in force")
        #expect(throws: SpoolError.self) { try tokens.load() }
        #expect(tokens.authorizes("Bearer alpha-token-000001"))

        // Then written: the new token replaces the old one.
        try handle.write(contentsOf: Data("beta-token-0000001\n".utf8))
        try handle.close()
        #expect(await eventually { tokens.authorizes("Bearer beta-token-0000001") })
        #expect(!tokens.authorizes("Bearer alpha-token-000001"))
    }

    /// Polls `condition` every 10 ms for up to 30 s.
    private func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<3000 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }
}

/// A log handler that keeps the messages of warnings and above, with their metadata.
private final class WarningLog: LogHandler, @unchecked Sendable {
    private let lines = Mutex<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    var messages: [String] { lines.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard event.level >= .warning else { return }
        lines.withLock { $0.append("\(event.message) \(event.metadata ?? [:])") }
    }
}
