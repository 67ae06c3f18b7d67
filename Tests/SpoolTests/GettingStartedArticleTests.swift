import Foundation
import Testing
import Spool

/// The Getting started article's shortest embedding (append, read with a consumer, commit) is
/// the code between the markers below, and that code works: the article and the catalog's
/// landing page show it line for line, so a renamed API or a wrong argument breaks this test.
@Suite struct GettingStartedArticleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")

    /// The first Swift code block after `heading` in the Markdown file at `path`.
    static func codeBlock(in path: String, after heading: String) throws -> String {
        let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
        let section = try #require(text.range(of: heading), "no '\(heading)' in \(path)")
        let start = try #require(text.range(of: "```swift\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "```\n", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// `import Spool`, then the lines of this file between the markers, less their indentation.
    static func shownCode() throws -> String {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let begin = try #require(source.range(of: "// Article: begin\n"))
        let end = try #require(source.range(of: "        // Article: end\n"))
        let lines = source[begin.upperBound..<end.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
        return "import Spool\n\n" + lines.map { $0.hasPrefix("        ") ? $0.dropFirst(8) : $0 }.joined(separator: "\n")
    }

    @Test func theArticleAndTheLandingPageShowTheCodeThatRuns() throws {
        let shown = try Self.shownCode()
        #expect(shown.contains("consumer.commit"))
        #expect(try Self.codeBlock(in: "Sources/Spool/Spool.docc/GettingStarted.md", after: "## Append and read back") == shown)
        #expect(try Self.codeBlock(in: "Sources/Spool/Spool.docc/Spool.md", after: "## Overview") == shown)
    }

    @Test func appendReadAndCommitDeliverTheEventOnce() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let directory = dir.path
        var delivered: [Record] = []
        func deliver(_ record: Record) { delivered.append(record) }

        // Article: begin
        let log = try EventLog.open(directory: directory)                  // 0700, locked, recovered
        try log.append(json: ["event": "screen_view", "screen": "home"])   // buffered: returns at once
        try await log.sync()                                               // durable, so a consumer sees it

        let consumer = try log.consumer(named: "reader")                   // new: starts at the oldest record
        let batch = try await consumer.read(maxCount: 50)                  // from the committed offset
        for record in batch.records { deliver(record) }                    // seq, timestamp, payload
        try await consumer.commit(batch)                                    // atomic and durable
        try log.close()
        // Article: end

        #expect(delivered.map(\.seq) == [0])
        let event = try JSONDecoder().decode([String: String].self, from: Data(try #require(delivered.first).payload))
        #expect(event == ["event": "screen_view", "screen": "home"])
        // The offset is on disk: reopened, the log gives the consumer nothing more to read.
        let reopened = try EventLog.open(directory: directory)
        let again = try reopened.consumer(named: "reader")
        #expect(again.committed == 1)
        #expect(try await again.read(maxCount: 50).isEmpty)
        try reopened.close()
    }
}
