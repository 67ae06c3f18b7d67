import Foundation
import Testing

/// Issue #37: progress on long work. On a terminal (a pseudo-terminal made by script(1)) a live
/// line is drawn and erased before the summary; elsewhere nothing, unless `--progress` asks for
/// plain lines; a long-running sync prints status lines when records moved.
@Suite struct ProgressTests {
    /// `spool arguments…` under a pseudo-terminal (`script -qfec`): what the terminal showed,
    /// standard output and standard error together, and the exit status.
    static func runInTerminal(_ arguments: [String]) throws -> (status: Int32, screen: String) {
        let quoted = ([SpoolBinary.path] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qfec", quoted.joined(separator: " "), "/dev/null"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// A log of `count` lines of about 190 bytes.
    static func makeLog(_ dir: String, count: Int) throws {
        let lines = (0..<count).map { "{\"n\":\($0),\"event\":\"page_view\",\"user\":\"u\($0 % 977)\",\"path\":\"/products/\($0 % 5000)\",\"pad\":\"\(String(repeating: "x", count: 120))\"}\n" }
        let append = try SpoolBinary.run(["append", dir], input: Data(lines.joined().utf8))
        #expect(append.status == 0, "\(append.stderr)")
    }

    /// A collector with `arguments`, its standard error in `dir/collector.err` (a test's
    /// directory, removed with it; its log is `dir/log`).
    static func collector(_ arguments: [String], _ dir: String) throws -> CollectorChild {
        try CollectorChild(arguments, stderrPath: dir + "/collector.err")
    }

    @Test func verifyOnATerminalDrawsALiveLineAndErasesItBeforeTheSummary() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeLog(dir, count: 20_000)
        let (status, screen) = try Self.runInTerminal(["verify", dir])
        #expect(status == 0, "\(screen)")
        // Drawn in place (a carriage return, then the line, then erase-to-end-of-line)…
        let drawn = try #require(screen.range(of: "\rverify: "), "\(screen.debugDescription)")
        #expect(screen.contains("/ 20000 records ("), "\(screen.debugDescription)")
        // …and erased before the summary, which comes after the last drawing.
        let erased = try #require(screen.range(of: "\r\u{1B}[K", options: .backwards), "\(screen.debugDescription)")
        let summary = try #require(screen.range(of: "ok: no corruption"), "\(screen.debugDescription)")
        #expect(drawn.lowerBound < erased.lowerBound && erased.upperBound <= summary.lowerBound, "\(screen.debugDescription)")
        #expect(screen.range(of: "verify: ", range: erased.upperBound..<screen.endIndex) == nil, "\(screen.debugDescription)")
    }

    @Test func withoutATerminalNoProgressIsPrinted() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.makeLog(dir, count: 5_000)
        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 0)
        #expect(verify.stderr.isEmpty, "\(verify.stderr.debugDescription)")
        #expect(!verify.stdout.contains("\r"))
        let crash = try SpoolBinary.run(["crash-test", "--rounds", "2", "--durability", "written", "--dir", dir + "-crash"])
        defer { try? FileManager.default.removeItem(atPath: dir + "-crash") }
        #expect(crash.status == 0, "\(crash.stdout)")
        #expect(!crash.stderr.contains("crash-test: "), "\(crash.stderr.debugDescription)")
    }

    @Test func progressFlagPrintsPlainLinesWithoutATerminal() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        try Self.makeLog(log, count: 600)
        let collector = try Self.collector(["--latency-ms", "100"], dir)
        defer { collector.stop() }
        // 60 requests one at a time, each answered after 100 ms: at least 6 s, three plain lines' worth.
        let sync = try SpoolBinary.run(["sync", log, "--url", collector.url, "--create", "--once", "--concurrency", "1",
                                        "--batch-count", "10", "--progress"])
        #expect(sync.status == 0, "\(sync.stderr)")
        let lines = sync.stderr.split(separator: "\n").filter { $0.hasPrefix("sync: ") }
        #expect(lines.count >= 3, "\(sync.stderr)")
        #expect(lines.allSatisfy { $0.contains(" / 600 records") }, "\(lines)")
        #expect(!sync.stderr.contains("\r") && !sync.stderr.contains("\u{1B}"), "\(sync.stderr.debugDescription)")
        #expect(sync.stdout.hasPrefix("sent 600 records in 60 requests"), "\(sync.stdout)")

        let crash = try SpoolBinary.run(["crash-test", "--rounds", "2", "--durability", "written", "--dir", dir + "/crash", "--progress"])
        #expect(crash.status == 0, "\(crash.stdout)")
        #expect(crash.stderr.contains("crash-test: 1 / 2 rounds (50%)"), "\(crash.stderr)")
    }

    @Test func syncOnceOnATerminalShowsItsProgressThenTheSummary() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        try Self.makeLog(log, count: 200)
        let collector = try Self.collector(["--latency-ms", "50"], dir)
        defer { collector.stop() }
        let (status, screen) = try Self.runInTerminal(["sync", log, "--url", collector.url, "--create", "--once", "--concurrency", "1", "--batch-count", "10"])
        #expect(status == 0, "\(screen)")
        let drawn = try #require(screen.range(of: "\rsync: "), "\(screen.debugDescription)")
        #expect(screen.contains(" / 200 records ("), "\(screen.debugDescription)")
        let erased = try #require(screen.range(of: "\r\u{1B}[K", options: .backwards))
        let summary = try #require(screen.range(of: "sent 200 records in 20 requests"), "\(screen.debugDescription)")
        #expect(drawn.lowerBound < erased.lowerBound && erased.upperBound <= summary.lowerBound, "\(screen.debugDescription)")
    }

    @Test func aLongRunningSyncPrintsStatusLinesWhenRecordsMove() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        try Self.makeLog(log, count: 300)
        let collector = try Self.collector([], dir)
        defer { collector.stop() }
        let errors = dir + "/sync.err"
        let sync = try SidecarTests.Child(["sync", log, "--url", collector.url, "--create", "--status-interval", "0.5"], stderrPath: errors)
        // Everything is delivered at once (what a previous run left); then nothing moves.
        var text = ""
        for _ in 0..<200 where !text.contains("spool sync: sent 300 records") {
            usleep(50_000)
            text = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        }
        usleep(1_600_000)  // three more intervals with nothing moving: no more status lines
        sync.process.terminate()
        sync.process.waitUntilExit()
        text = try String(contentsOfFile: errors, encoding: .utf8)
        let status = text.split(separator: "\n").filter { $0.hasPrefix("spool sync: sent ") }
        #expect(status.count >= 1, "\(text)")
        #expect(status.last?.contains("spool sync: sent 300 records (+") == true, "\(text)")
        #expect(status.last?.contains(", lag 0 records, 0 retried, 0 failures") == true, "\(text)")
        #expect(status.filter { $0.hasPrefix("spool sync: sent 300 records") }.count == 1, "a status line although nothing moved: \(text)")
    }
}
