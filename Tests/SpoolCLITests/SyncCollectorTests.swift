import Foundation
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

        let collector = Process()
        collector.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        collector.arguments = ["collector", "--port", "0", "--out", out, "--failure-rate", "0.2", "--seed", "7",
                               "--retry-after", "0", "--poison-marker", "POISON"]
        let collectorOutput = Pipe()
        collector.standardOutput = collectorOutput
        collector.standardError = FileHandle.nullDevice
        try collector.run()
        defer { if collector.isRunning { collector.terminate() } }
        var printed = Data()
        while !printed.contains(0x0A) {
            let chunk = collectorOutput.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed.append(chunk)
        }
        let listening = String(decoding: printed, as: UTF8.self)
        let port = try #require(listening.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) }, "\(listening)")

        let lines = (0..<count).map { $0 == poison ? #"{"n":\#($0),"tag":"POISON"}"# : #"{"n":\#($0)}"# }
        let append = try SpoolBinary.run(["append", log, "--durability", "synced"], input: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(append.status == 0, "\(append.stderr)")

        let arguments = ["sync", log, "--url", "http://127.0.0.1:\(port)/batch", "--once", "--batch-count", "37",
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
        let deadLetters = try SpoolBinary.run(["dump", log + "/deadletter/sync"])
        #expect(deadLetters.status == 0, "\(deadLetters.stderr)")
        let refused = seqs(deadLetters.stdout)
        #expect(refused.contains(UInt64(poison)), "the poison record is in the dead-letter log")
        #expect(!received.contains(UInt64(poison)))
        // Every record once, in one place or the other; the collector got them in order.
        #expect((received + refused).sorted() == (0..<UInt64(count)).map { $0 })
        #expect(received == received.sorted())
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.stdout.contains("sync  offset \(count)  lag 0 records"), "\(stat.stdout)")
    }
}
