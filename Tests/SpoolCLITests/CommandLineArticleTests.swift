import Foundation
import Testing

/// The DocC article "The command line" (`Sources/Spool/Spool.docc/CommandLine.md`) against
/// `spool help`: its synopsis names every command, and no option a command does not have.
@Suite struct CommandLineArticleTests {
    /// The synopsis block of the article: each command with the options it names.
    static func synopsis() throws -> [String: Set<String>] {
        let article = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/Spool/Spool.docc/CommandLine.md")
        let text = try String(contentsOf: article, encoding: .utf8)
        let start = try #require(text.range(of: "```\nspool "))
        let end = try #require(text.range(of: "```", range: start.upperBound..<text.endIndex))
        var commands: [String: Set<String>] = [:]
        var current = ""
        for line in text[text.index(start.lowerBound, offsetBy: 4)..<end.lowerBound].split(separator: "\n") {
            if line.hasPrefix("spool ") {
                current = String(line.split(separator: " ")[1])
                commands[current, default: []] = []
            }
            commands[current]?.formUnion(options(in: line))
        }
        return commands
    }

    /// Every `--option` in `text`.
    static func options(in text: Substring) -> Set<String> {
        Set(text.matches(of: /--[a-z][a-z0-9-]*/).map { String($0.output) })
    }

    /// The options `spool help <command>` lists (the lines of its OPTIONS section).
    static func helpOptions(_ command: String) throws -> Set<String> {
        let help = try SpoolBinary.run(["help", command])
        #expect(help.status == 0)
        let lines = help.stdout.split(separator: "\n").drop { !$0.hasPrefix("OPTIONS:") }
        return Set(lines.compactMap { line in
            line.firstMatch(of: /^  (?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)/).map { String($0.output.1) }
        })
    }

    @Test func theSynopsisNamesEveryCommand() throws {
        let help = try SpoolBinary.run(["help"])
        let listed = help.stdout.split(separator: "\n").drop { !$0.hasPrefix("SUBCOMMANDS:") }.dropFirst()
            .compactMap { $0.firstMatch(of: /^  ([a-z][a-z-]*)\s/).map { String($0.output.1) } }
        #expect(listed.count >= 10, "\(help.stdout)")
        #expect(Set(try Self.synopsis().keys) == Set(listed))
    }

    @Test func theSynopsisNamesOnlyOptionsTheCommandsHave() throws {
        for (command, named) in try Self.synopsis() {
            let real = try Self.helpOptions(command)
            #expect(!real.isEmpty, "spool help \(command) lists no option")
            #expect(named.subtracting(real).isEmpty, "spool \(command) has no \(named.subtracting(real).sorted())")
        }
    }
}
