import Foundation
import Testing

/// Issue 50, item 4: `stat` and `verify` of a group report every writer log, whatever one of
/// them does. A writer log that cannot be opened is named with its reason, every other one is
/// still read and reported, and `--json` always prints its document.
@Suite struct GroupReportTests {
    /// A group of three writer logs: `app` intact; `widget` with a byte flipped inside its
    /// active segment (valid blocks before and after it); `ext` with a FIFO where its `SYNCED`
    /// file should be, which no snapshot can read.
    func damagedGroup() throws -> String {
        let group = temporaryDirectory()
        for writer in ["app", "widget", "ext"] {
            // One `spool append` per chunk: each ends by writing its records as a block of their own.
            for chunk in 0..<5 {
                let input = (0..<100).map { "{\"writer\":\"\(writer)\",\"chunk\":\(chunk),\"n\":\($0),\"pad\":\"\(String(repeating: "x", count: 40))\"}\n" }.joined()
                let result = try SpoolBinary.run(["append", group, "--writer", writer], input: Data(input.utf8))
                #expect(result.status == 0, "\(result.stderr)")
            }
        }
        let segment = group + "/writers/widget/00000000000000000000.seg"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        #expect(bytes.count > 1000)
        bytes[bytes.count * 2 / 5] ^= 0xFF  // inside the blocks, never the last one
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        let synced = group + "/writers/ext/SYNCED"
        try FileManager.default.removeItem(atPath: synced)
        #expect(mkfifo(synced, 0o600) == 0)
        return group
    }

    @Test func verifyOfAGroupReportsEveryWriterLogWhenOneCannotBeOpened() throws {
        let group = try damagedGroup()
        defer { try? FileManager.default.removeItem(atPath: group) }

        let json = try SpoolBinary.run(["verify", group, "--json"])
        #expect(json.status == 1, "corruption was found: \(json.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "stdout: \(json.stdout)")
        let writers = try #require(document["writers"] as? [[String: Any]])
        #expect(Set(writers.compactMap { $0["writer"] as? String }) == ["app", "widget"])
        let widget = try #require(writers.first { $0["writer"] as? String == "widget" })
        #expect((widget["corrupt"] as? [Any])?.isEmpty == false, "widget's damage is reported")
        #expect(writers.first { $0["writer"] as? String == "app" }?["clean"] as? Bool == true)
        let unopened = try #require(document["unopened"] as? [[String: Any]])
        #expect(unopened.map { $0["writer"] as? String } == ["ext"])
        #expect((unopened.first?["error"] as? String)?.contains("SYNCED") == true, "\(unopened)")
        #expect(document["clean"] as? Bool == false)
        #expect(Set(document["damaged"] as? [String] ?? []) == ["widget"])

        let text = try SpoolBinary.run(["verify", group])
        #expect(text.status == 1)
        #expect(text.stdout.contains("writer ext: not checked:"), "\(text.stdout)")
        #expect(text.stdout.contains("CORRUPT"), "\(text.stdout)")
        #expect(text.stdout.contains("1 could not be checked (ext)"), "\(text.stdout)")
    }

    @Test func aGroupWhoseOnlyProblemIsAnUnopenableWriterLogCouldNotBeChecked() throws {
        let group = try damagedGroup()
        defer { try? FileManager.default.removeItem(atPath: group) }
        try FileManager.default.removeItem(atPath: group + "/writers/widget")
        let json = try SpoolBinary.run(["verify", group, "--json"])
        #expect(json.status == 2, "a writer log could not be checked, none was found damaged: \(json.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "stdout: \(json.stdout)")
        #expect((document["unopened"] as? [[String: Any]])?.count == 1)
        #expect(document["clean"] as? Bool == false)
    }

    @Test func statOfAGroupReportsEveryWriterLogWhenOneCannotBeOpened() throws {
        let group = try damagedGroup()
        defer { try? FileManager.default.removeItem(atPath: group) }

        let json = try SpoolBinary.run(["stat", group, "--json"])
        #expect(json.status == 1, "\(json.stderr)")
        let document = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "stdout: \(json.stdout)")
        let writers = try #require(document["writers"] as? [[String: Any]])
        #expect(Set(writers.compactMap { $0["writer"] as? String }) == ["app", "widget"])
        #expect(writers.allSatisfy { ($0["records"] as? Int ?? 0) > 0 })
        let unopened = try #require(document["unopened"] as? [[String: Any]])
        #expect(unopened.map { $0["writer"] as? String } == ["ext"])
        let total = try #require(document["total"] as? [String: Any])
        #expect(total["writers"] as? Int == 2)

        let text = try SpoolBinary.run(["stat", group])
        #expect(text.status == 1)
        #expect(text.stdout.contains("writer ext: not read:"), "\(text.stdout)")
        #expect(text.stdout.contains("total "), "\(text.stdout)")
    }

    /// Issue 50, item 6: the help said "an empty LOCK is made if there is none"; `verify`,
    /// `stat` and `dump` create no file at all.
    @Test func readingCommandsCreateNoFileAndTheHelpSaysSo() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try SpoolBinary.run(["append", dir], input: Data("{\"a\":1}\n".utf8)).status == 0)
        try FileManager.default.removeItem(atPath: dir + "/LOCK")
        let before = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        for command in [["verify", dir], ["stat", dir], ["dump", dir]] {
            let result = try SpoolBinary.run(command)
            #expect(result.status == 0, "\(command): \(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == before, "\(command) created a file")
        }
        let help = try SpoolBinary.run(["help", "verify"])
        #expect(!help.stdout.contains("LOCK is made"), "\(help.stdout)")
        #expect(help.stdout.contains("creates or changes no file"), "\(help.stdout)")
    }
}
