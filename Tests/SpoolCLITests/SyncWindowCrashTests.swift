import Foundation
import Testing

/// `spool sync` with many requests in flight, killed with SIGKILL while its window is full.
extension SyncCollectorTests {
    /// The committed offset of consumer `up`, as `spool stat` prints it (0 before it exists).
    func offset(of log: String) throws -> UInt64 {
        let stat = try SpoolBinary.run(["stat", log])
        guard let range = stat.stdout.range(of: "up  offset ") else { return 0 }
        return UInt64(stat.stdout[range.upperBound...].prefix { $0.isNumber }) ?? 0
    }

    /// Answers out of order (5 to 105 ms each, 5% failing) to 8 requests in flight, and the
    /// worker killed mid-window six times: after every kill the offset has only moved forward
    /// and never past a record the collector had stored; a last `--once` run then delivers
    /// every record, each stored once.
    @Test func killsWhileTheWindowIsFullLoseNothingAndCommitInOrder() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        let count = 4_000
        let input = Data((0..<count).map { #"{"n":\#($0)}"# + "\n" }.joined().utf8)
        #expect(try SpoolBinary.run(["append", log, "--durability", "synced"], input: input).status == 0)
        let (collector, port, _) = try startCollector(out: out, fileSizeBlocks: nil, arguments: [
            "--latency-ms", "5", "--latency-jitter-ms", "100", "--failure-rate", "0.05", "--retry-after", "0", "--seed", "3",
        ])
        defer { if collector.isRunning { collector.terminate(); collector.waitUntilExit() } }
        let url = "http://127.0.0.1:\(port)/batch"

        var previous: UInt64 = 0
        var generator = SystemRandomNumberGenerator()
        for round in 0..<6 {
            let sync = Process()
            sync.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            sync.arguments = ["sync", log, "--url", url, "--consumer", "up", "--create", "--batch-count", "10",
                              "--concurrency", round % 2 == 0 ? "8" : "adaptive", "--interval", "0"]
            sync.standardOutput = FileHandle.nullDevice
            sync.standardError = FileHandle.nullDevice
            try sync.run()
            Thread.sleep(forTimeInterval: Double.random(in: 0.3...0.8, using: &generator))
            kill(sync.processIdentifier, SIGKILL)
            sync.waitUntilExit()
            let committed = try offset(of: log)
            #expect(committed >= previous, "round \(round): the offset went back from \(previous) to \(committed)")
            // Nothing committed that the collector has not stored.
            let stored = Set(seqs((try? String(contentsOfFile: out, encoding: .utf8)) ?? ""))
            let missing = (0..<committed).first { !stored.contains($0) }
            #expect(missing == nil, "round \(round): \(missing ?? 0) is committed but was never stored")
            previous = committed
        }
        #expect(previous < UInt64(count), "the kills came after the drain: nothing was in flight")

        let last = try SpoolBinary.run(["sync", log, "--url", url, "--consumer", "up", "--once", "--retries", "50",
                                        "--concurrency", "adaptive", "--batch-count", "10"])
        #expect(last.status == 0, "\(last.stderr)")
        collector.terminate()
        collector.waitUntilExit()
        let received = seqs((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        #expect(received.count == count, "each record stored once")
        #expect(Set(received) == Set(0..<UInt64(count)))
        #expect(try offset(of: log) == UInt64(count))
    }

    /// `spool sync --once` beside a writer that keeps appending ends at the end of the log it
    /// saw when it started (a cron job must not hang), and its summary is truthful.
    @Test func syncOnceBesideALiveWriterEndsAtTheEndItSaw() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        #expect(try SpoolBinary.run(["append", log], input: Data((0..<2_000).map { #"{"n":\#($0)}"# + "\n" }.joined().utf8)).status == 0)
        let (collector, port, _) = try startCollector(out: out, fileSizeBlocks: nil, arguments: ["--latency-ms", "20"])
        defer { if collector.isRunning { collector.terminate(); collector.waitUntilExit() } }

        // A writer that keeps appending, as long as the test runs.
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/bin/sh")
        writer.arguments = ["-c", "i=0; while :; do echo \"{\\\"w\\\":$i}\"; i=$((i+1)); done | exec \"$0\" append \"$1\"", SpoolBinary.path, log]
        writer.standardOutput = FileHandle.nullDevice
        writer.standardError = FileHandle.nullDevice
        try writer.run()
        defer { writer.terminate(); writer.waitUntilExit() }
        Thread.sleep(forTimeInterval: 0.5)

        let sync = Process()
        sync.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        sync.arguments = ["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--sidecar", "--consumer", "s", "--create",
                          "--once", "--concurrency", "1", "--batch-count", "500"]
        let output = Pipe()
        sync.standardOutput = output
        sync.standardError = FileHandle.nullDevice
        try sync.run()
        let watchdog = DispatchWorkItem { if sync.isRunning { kill(sync.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        sync.waitUntilExit()
        watchdog.cancel()
        #expect(sync.terminationReason == .exit && sync.terminationStatus == 0, "it did not end: \(printed)")
        #expect(printed.contains("0 retried, up to 1 in flight"), "\(printed)")
    }

    /// `--retries 0` against a server that always fails: one request made, none retried.
    @Test func theSummaryCountsOnlyRequestsReallyRetried() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        #expect(try SpoolBinary.run(["append", log], input: Data("{}\n".utf8)).status == 0)
        let (collector, port, _) = try startCollector(out: dir + "/out.ndjson", fileSizeBlocks: nil, arguments: [
            "--failure-rate", "1", "--failure-status", "503",
        ])
        defer { collector.terminate(); collector.waitUntilExit() }
        let sync = try SpoolBinary.run(["sync", log, "--url", "http://127.0.0.1:\(port)/batch?token=SECRET", "--once", "--create",
                                        "--retries", "0"])
        #expect(sync.status == 1)
        #expect(sync.stdout.contains("1 requests made, 0 retried, up to 1 in flight"), "\(sync.stdout)")
        #expect(!sync.stderr.contains("SECRET") && !sync.stdout.contains("SECRET"))

        // The service's startup line names the URL without its query.
        let service = Process()
        service.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        service.arguments = ["sync", log, "--url", "http://127.0.0.1:\(port)/batch?token=SECRET", "--interval", "0"]
        let errors = Pipe()
        service.standardOutput = FileHandle.nullDevice
        service.standardError = errors
        try service.run()
        Thread.sleep(forTimeInterval: 1)
        service.terminate()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        service.waitUntilExit()
        #expect(text.contains("127.0.0.1:\(port)/batch;") && !text.contains("SECRET"), "\(text)")
    }
}
