import Foundation
import Testing

/// `spool demo` end to end: real producers, a real sync worker, the reference collector on
/// 127.0.0.1; the summary must report 0 lost, checked here rather than by eye.
@Suite struct DemoTests {
    func summaryValue(_ output: String, _ name: String) -> String? {
        output.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map {
            $0.dropFirst(name.count).trimmingCharacters(in: .whitespaces)
        }
    }

    @Test(arguments: [(20_000, false), (5_000, true)])
    func demoDeliversEveryEventAndLosesNone(events: Int, faults: Bool) throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try SpoolBinary.run(["demo", "--events", "\(events)", "--dir", dir] + (faults ? ["--faults"] : []))
        #expect(result.status == 0, "\(result.stdout.suffix(1500)) \(result.stderr.suffix(800))")
        #expect(summaryValue(result.stdout, "lost") == "0", "\(result.stdout.suffix(1500))")
        #expect(summaryValue(result.stdout, "events appended") == "\(events)")
        #expect(summaryValue(result.stdout, "received by collector") == "\(events) unique")
        // The collector's output holds each event exactly once, and the log verifies clean.
        let lines = try String(contentsOfFile: dir + "/collector.ndjson", encoding: .utf8).split(separator: "\n")
        #expect(lines.count == events)
        let verify = try SpoolBinary.run(["verify", dir + "/log"])
        #expect(verify.status == 0)
        if faults {
            #expect(summaryValue(result.stdout, "retries").map { !$0.hasPrefix("0") } == true, "faults make retries happen")
        }
    }

    /// Without `--dir` the demo makes a fresh private directory (`mkdtemp`, 0700), not a
    /// predictable `/tmp/spool-demo-<pid>` another user could make first (issue #21, item 7).
    @Test func theDefaultDirectoryIsFreshAndPrivate() throws {
        let result = try SpoolBinary.run(["demo", "--events", "200"])
        #expect(result.status == 0, "\(result.stderr.suffix(800))")
        let logLine = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("log: ") })
        let logDirectory = String(logLine.dropFirst("log: ".count))
        let root = (logDirectory as NSString).deletingLastPathComponent
        defer { try? FileManager.default.removeItem(atPath: root) }
        // mkdtemp's name: the prefix and six random characters.
        #expect((root as NSString).lastPathComponent.count == "spool-demo-XXXXXX".count)
        let attributes = try FileManager.default.attributesOfItem(atPath: root)
        #expect(attributes[.posixPermissions] as? Int == 0o700)
        #expect(summaryValue(result.stdout, "lost") == "0")
    }

    /// A directory that another user made, with the demo's marker in it, is refused and left alone.
    @Test func aDirectoryOfAnotherUserIsRefused() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try #require(FileManager.default.createFile(atPath: dir + "/.spool-demo", contents: nil))
        try FileManager.default.createSymbolicLink(atPath: dir + "/log", withDestinationPath: "/nonexistent-target")
        // As root the directory is given to `nobody`; otherwise it stays ours but writable by others.
        let expected = geteuid() == 0 ? "belongs to another user" : "writable by other users"
        try #require(geteuid() == 0 ? chown(dir, 65534, 65534) == 0 : chmod(dir, 0o777) == 0)
        let result = try SpoolBinary.run(["demo", "--events", "10", "--dir", dir])
        #expect(result.status == 64 && result.stderr.contains(expected), "\(result.stderr)")
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: dir + "/log")
        #expect(link == "/nonexistent-target")
    }
}
