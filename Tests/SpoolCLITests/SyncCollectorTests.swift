import Foundation
import Spool
import Testing

/// `spool sync` against `spool collector`, both real processes on 127.0.0.1: the collector
/// fails a share of requests and refuses a batch holding a poison record; one `sync --once`
/// must still deliver every record exactly once, either to the collector's output or to the
/// dead-letter log, commit past all of them, and a second run must find nothing to send.
@Suite struct SyncCollectorTests {
    /// The `"seq":N` values of NDJSON envelope lines.
    func seqs(_ text: String) -> [UInt64] {
        text.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: #""seq":"#) else { return nil }
            return UInt64(line[range.upperBound...].prefix { $0.isNumber })
        }
    }

    @Test func syncOnceDeliversEveryRecordOnceThroughFailuresAndAPoisonBatch() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let out = dir + "/received.ndjson"
        let count = 300
        let poison = 150

        let (collector, port, collectorOutput) = try startCollector(out: out, fileSizeBlocks: nil, arguments: [
            "--failure-rate", "0.2", "--seed", "7", "--retry-after", "0", "--poison-marker", "POISON",
        ])
        defer { if collector.isRunning { collector.terminate() } }

        let lines = (0..<count).map { $0 == poison ? #"{"n":\#($0),"tag":"POISON"}"# : #"{"n":\#($0)}"# }
        let append = try SpoolBinary.run(["append", log, "--durability", "synced"], input: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(append.status == 0, "\(append.stderr)")

        let arguments = ["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--concurrency", "1", "--batch-count", "37",
                         "--encoding", "ndjson", "--compression", "zstd", "--header", "X-Test: yes", "--retries", "50"]
        // No consumer yet: a name that does not exist is refused (a typo would re-upload the
        // whole log and hold retention back), until --create asks for it.
        let unknown = try SpoolBinary.run(arguments)
        #expect(unknown.status != 0 && unknown.stderr.contains("no consumer named sync"), "\(unknown.stderr)")
        let first = try SpoolBinary.run(arguments + ["--create"])
        #expect(first.status == 0, "\(first.stderr)")
        let second = try SpoolBinary.run(arguments)
        #expect(second.status == 0, "\(second.stderr)")

        collector.terminate()  // SIGTERM: it stops gracefully, syncs its output and prints its counts
        let rest = collectorOutput.fileHandleForReading.readDataToEndOfFile()
        collector.waitUntilExit()
        #expect(collector.terminationReason == .exit && collector.terminationStatus == 0)
        let counts = String(decoding: rest, as: UTF8.self)
        #expect(counts.contains("faults ") && !counts.contains("faults 0 "), "no failure was injected: \(counts)")

        let received = seqs((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        // Each refused record as an origin record: its seq in the log, its exact bytes.
        let refused = try dumpOrigins(log + "/deadletter/sync").map(\.seq)
        #expect(refused.contains(UInt64(poison)), "the poison record is in the dead-letter log")
        #expect(!received.contains(UInt64(poison)))
        // Every record once, in one place or the other; the collector got them in order.
        #expect((received + refused).sorted() == (0..<UInt64(count)).map { $0 })
        #expect(received == received.sorted())
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.stdout.contains("sync  offset \(count)  lag 0 records"), "\(stat.stdout)")
    }

    /// A record larger than the collector's `--max-record-bytes` (issue #33: a collector
    /// stored a 60 MB record its forwarder could never send on) is answered 413: the sync
    /// splits its batch down to that record, dead-letters it alone, and delivers every other.
    @Test func aRecordPastTheCollectorsLimitIsDeadLetteredAloneAndTheRestDelivered() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        let big = 7
        let lines = (0..<20).map { $0 == big ? #"{"big":""# + String(repeating: "x", count: 5000) + #""}"# : #"{"n":\#($0)}"# }
        #expect(try SpoolBinary.run(["append", log, "--durability", "synced"], input: Data((lines.joined(separator: "\n") + "\n").utf8)).status == 0)

        let (collector, port, _) = try startCollector(out: out, fileSizeBlocks: nil, arguments: ["--max-record-bytes", "1000"])
        let sync = try SpoolBinary.run(["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--create", "--concurrency", "1",
                                        "--batch-count", "10", "--retries", "5"])
        collector.terminate()
        collector.waitUntilExit()
        #expect(sync.status == 0, "\(sync.stderr)")
        let received = seqs((try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
        #expect(received == (0..<20).filter { $0 != big }.map { UInt64($0) })
        // The dead-letter log holds each refused record as an origin record: its seq and exact bytes.
        let deadLetters = try dumpOrigins(log + "/deadletter/sync")
        #expect(deadLetters.map(\.seq) == [UInt64(big)])
        #expect(deadLetters.first?.payload == Array(lines[big].utf8))
    }

    /// Records that are not UTF-8 (issue #21, item 1: `printf 'caf\\xe9\\n\\xff\\xfe\\x00bin\\n'`,
    /// then random bytes) reach the collector's `--out` file byte for byte in every encoding:
    /// `data_base64` for them, a JSON string for the text ones.
    @Test(arguments: ["json", "ndjson", "raw"])
    func binaryRecordsReachTheOutputFileByteForByte(encoding: String) throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        var random = SplitMix64(seed: 21)
        var records: [[UInt8]] = [Array("caf".utf8) + [0xE9], [0xFF, 0xFE, 0x00] + Array("bin".utf8), Array(0...255).filter { $0 != 0x0A }]
        while records.count < 200 {
            let record = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }.filter { $0 != 0x0A }
            // JSON texts travel as JSON values (whitespace aside), not as bytes: tested elsewhere.
            if (try? JSONSerialization.jsonObject(with: Data(record), options: .fragmentsAllowed)) == nil { records.append(record) }
        }
        let input = records.reduce(into: Data()) { $0.append(contentsOf: $1 + [0x0A]) }
        #expect(try SpoolBinary.run(["append", log, "--durability", "synced"], input: input).status == 0)

        let (collector, port, _) = try startCollector(out: out, fileSizeBlocks: nil)
        let sync = try SpoolBinary.run(["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--create", "--concurrency", "1",
                                        "--encoding", encoding, "--batch-count", "37", "--retries", "20"])
        collector.terminate()
        collector.waitUntilExit()
        #expect(sync.status == 0, "\(sync.stderr)")

        let lines = try #require(FileManager.default.contents(atPath: out)).split(separator: 0x0A)
        #expect(lines.count == records.count)
        for (index, line) in lines.enumerated() {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
            #expect(object["seq"] as? Int == index)
            let bytes: [UInt8]? = if let base64 = object["data_base64"] as? String {
                Data(base64Encoded: base64).map(Array.init)
            } else {
                (object["data"] as? String).map { Array($0.utf8) }
            }
            #expect(bytes == records[index], "seq \(index)")
        }
    }

    /// `--retries N` counts retries of one upload (issue #18): a server that answers 503 to
    /// every third request, so no upload ever fails twice in a row, is drained to the end with
    /// `--retries 1` with one request in flight (the issue's case). Before, the retries were
    /// counted across the run and the sync gave up after N scattered 503s. (With several in
    /// flight, which batch a server's third request is depends on arrival order, so the same
    /// batch may fail twice: `StateMachineRoundTests` covers rounds on a manual clock.)
    @Test func retriesCountPerUploadSoAServerFailingEveryThirdRequestIsDrained() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        let input = Data((0..<600).map { #"{"n":\#($0)}"# + "\n" }.joined().utf8)
        #expect(try SpoolBinary.run(["append", log], input: input).status == 0)

        let (collector, port, _) = try startCollector(out: out, fileSizeBlocks: nil, arguments: ["--fail-every", "3", "--retry-after", "0"])
        let sync = try SpoolBinary.run(["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--create",
                                        "--batch-count", "10", "--retries", "1", "--concurrency", "1"])
        collector.terminate()
        collector.waitUntilExit()
        #expect(sync.status == 0, "\(sync.stdout) \(sync.stderr)")
        #expect(sync.stdout.contains("sent 600 records in 60 requests"), "\(sync.stdout)")
        let lines = try #require(FileManager.default.contents(atPath: out)).split(separator: 0x0A)
        #expect(lines.count == 600)
    }

    /// Starts `spool collector --port 0 --out out arguments…` through /bin/sh (`exec`, so
    /// terminating the process signals the collector itself), under `ulimit -f blocks` (SIGXFSZ
    /// ignored, so writes past it fail with EFBIG as on a full disk) when `blocks` is given;
    /// returns the process, its port and its standard output (the listening line read).
    func startCollector(out: String, fileSizeBlocks blocks: Int?, arguments: [String] = []) throws -> (Process, Int, Pipe) {
        let collector = Process()
        collector.executableURL = URL(fileURLWithPath: "/bin/sh")
        let limit = blocks.map { "ulimit -f \($0); trap '' XFSZ; " } ?? ""
        collector.arguments = ["-c", limit + "exec \"$0\" collector --port 0 --out \"$@\"", SpoolBinary.path, out] + arguments
        let output = Pipe()
        collector.standardOutput = output
        collector.standardError = FileHandle.nullDevice
        try collector.run()
        let listening = nextLine(of: output)
        let port = try #require(CollectorChild.port(in: listening), "\(listening)")
        return (collector, port, output)
    }

    /// A write of the collector's `--out` file that fails (the file-size limit, as a full disk)
    /// leaves the file as it was before the request: whole lines only, each record once, and
    /// a retry after space is back completes it (issue #21, item 9).
    @Test func aFailedOutputWriteLeavesOnlyWholeLinesAndARetryCompletesTheFile() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/out.ndjson"
        let count = 3000
        // ~230 bytes a line that compress poorly: the 32 KiB limit is reached after ~140 records.
        let lines = (0..<count).map { i -> String in
            var state = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ 1
            let digits = (0..<200).map { _ -> Character in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return Array("0123456789abcdef")[Int(state >> 60)]
            }
            return "{\"n\":\(i),\"p\":\"\(String(digits))\"}"
        }
        #expect(try SpoolBinary.run(["append", log, "--durability", "synced"], input: Data((lines.joined(separator: "\n") + "\n").utf8)).status == 0)
        let sync = ["sync", log, "--once", "--concurrency", "1", "--retries", "0", "--batch-count", "50", "--encoding", "ndjson"]

        let (limited, port, _) = try startCollector(out: out, fileSizeBlocks: 64)
        let failed = try SpoolBinary.run(sync + ["--url", "http://127.0.0.1:\(port)/batch", "--create"])
        limited.terminate()
        limited.waitUntilExit()
        #expect(failed.status != 0, "the limit must stop the sync: \(failed.stdout)")
        let partial = try #require(FileManager.default.contents(atPath: out))
        #expect(partial.last == 0x0A, "the file ends with a whole line")
        let partialSeqs = seqs(String(decoding: partial, as: UTF8.self))
        #expect(partialSeqs == (0..<UInt64(partialSeqs.count)).map { $0 } && partialSeqs.count < count)
        #expect(String(decoding: partial, as: UTF8.self).split(separator: "\n").allSatisfy { $0.hasPrefix("{") && $0.hasSuffix("}") })

        let (unlimited, port2, _) = try startCollector(out: out, fileSizeBlocks: nil)
        let completed = try SpoolBinary.run(sync + ["--url", "http://127.0.0.1:\(port2)/batch"])
        unlimited.terminate()
        unlimited.waitUntilExit()
        #expect(completed.status == 0, "\(completed.stderr)")
        let whole = try String(contentsOfFile: out, encoding: .utf8)
        #expect(seqs(whole) == (0..<UInt64(count)).map { $0 })
        #expect(whole.split(separator: "\n").count == count)
    }

    /// A server whose `Retry-After` asks for more than a day cannot hold `sync --once` longer
    /// than `--max-retry-after` per retry (issue #21, item 12). The run is killed after 120 s,
    /// so a missing bound fails the test instead of hanging it for the hour the old cap allowed.
    @Test func aHugeRetryAfterIsBoundedByMaxRetryAfterInAOneShotSync() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        #expect(try SpoolBinary.run(["append", log], input: Data("{}\n".utf8)).status == 0)
        let (collector, port, _) = try startCollector(out: dir + "/out.ndjson", fileSizeBlocks: nil, arguments: [
            "--failure-rate", "1", "--failure-status", "429", "--retry-after", "100000",
        ])
        defer { collector.terminate(); collector.waitUntilExit() }

        let sync = Process()
        sync.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        sync.arguments = ["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--create", "--retries", "2",
                          "--max-retry-after", "0.1"]
        let errors = Pipe()
        sync.standardOutput = FileHandle.nullDevice
        sync.standardError = errors
        try sync.run()
        let watchdog = DispatchWorkItem { if sync.isRunning { kill(sync.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 120, execute: watchdog)
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        sync.waitUntilExit()
        watchdog.cancel()
        #expect(sync.terminationReason == .exit, "killed by the watchdog: the Retry-After was not bounded")
        #expect(sync.terminationStatus == 1 && text.contains("429"), "\(text)")
    }
}
