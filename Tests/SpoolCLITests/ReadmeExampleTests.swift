import Foundation
import Testing

/// The README's embedding example (and the Getting started article's) is the program
/// `Examples/GettingStarted`, and that program works: run twice against a real collector, it
/// delivers every event it appended, each once.
@Suite struct ReadmeExampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")

    static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    /// The first Swift code block after `heading` in the Markdown file at `path`.
    static func codeBlock(in path: String, after heading: String) throws -> String {
        let text = try read(path)
        let section = try #require(text.range(of: heading), "no '\(heading)' in \(path)")
        let start = try #require(text.range(of: "```swift\n", range: section.upperBound..<text.endIndex))
        let end = try #require(text.range(of: "```\n", range: start.upperBound..<text.endIndex))
        return String(text[start.upperBound..<end.lowerBound])
    }

    /// What the documents must show: the program's imports, then all it does after its
    /// `// README:` marker (not the lines that stand in for the app's directory, URL and token).
    static func shownProgram() throws -> String {
        let program = try read("Examples/GettingStarted/main.swift")
        let imports = program.split(separator: "\n").filter { $0.hasPrefix("import ") }.joined(separator: "\n")
        let marker = try #require(program.range(of: "// README: from here to the end.\n"))
        return imports + "\n\n" + program[marker.upperBound...]
    }

    @Test func theReadmeAndTheArticleShowTheExampleProgram() throws {
        let shown = try Self.shownProgram()
        #expect(shown.contains("EventLog.open"))
        #expect(try Self.codeBlock(in: "README.md", after: "## Embedding") == shown)
        #expect(try Self.codeBlock(in: "Sources/Spool/Spool.docc/GettingStarted.md", after: "## Embed it") == shown)
    }

    @Test func theExampleProgramDeliversWhatItAppends() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let out = dir + "/received.ndjson"
        let collector = try MetricsEndpointTests.Child(["collector", "--port", "0", "--out", out])
        defer { kill(collector.process.processIdentifier, SIGKILL) }
        let port = try collector.port(after: "listening on 127.0.0.1", onStandardError: false)

        let program = URL(fileURLWithPath: SpoolBinary.path).deletingLastPathComponent().appendingPathComponent("GettingStarted").path
        for run in 1...2 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = ["http://127.0.0.1:\(port)/batch", dir + "/events"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "run \(run): \(printed)")
            // Each run appends two events (seqs 0-1, then 2-3) and sends them.
            #expect(printed == "record \(2 * run - 1) is durable; 2 records sent\n", "run \(run)")
        }

        // The collector writes a batch's records before it answers, so they are all in --out.
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 4, "\(lines)")
        for (seq, line) in lines.enumerated() {
            #expect(line.contains(#""seq":\#(seq),"#), "\(line)")
            #expect(line.contains(seq % 2 == 0 ? #""event":"screen_view""# : #""event":"purchase""#), "\(line)")
        }
    }
}
