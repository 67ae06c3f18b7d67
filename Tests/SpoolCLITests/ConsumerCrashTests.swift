import Foundation
import Testing
@testable import Spool

/// SIGKILL a process that reads and commits in a loop (`spool dump --consumer c --commit`);
/// after reopening, the committed offset is one the process committed or was committing — never
/// ahead of what it had read, never garbage — and reading resumes exactly there.
@Suite struct ConsumerCrashTests {
    @Test func killedConsumerResumesExactlyAtACommittedOffset() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let total = 20_000
        let lines = (0..<total).map { "{\"event\":\"view\",\"n\":\($0)}" }.joined(separator: "\n") + "\n"
        let append = try SpoolBinary.run(["append", dir, "--durability", "synced"], input: Data(lines.utf8))
        #expect(append.status == 0)
        var seed = UInt64(Date().timeIntervalSince1970)
        var previous: UInt64 = 0
        for round in 0..<20 {
            let child = Process()
            child.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            child.arguments = ["dump", dir, "--consumer", "c", "--commit", "--batch", "37"]
            let out = Pipe()
            child.standardOutput = out
            child.standardError = FileHandle.nullDevice
            try child.run()
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            Thread.sleep(forTimeInterval: Double(seed >> 33 % 150) / 1000 + 0.05)
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            var printedThrough: UInt64?
            var lastCommitted: UInt64?
            for line in output.split(separator: "\n") {
                if line.hasPrefix("# committed through ") {
                    lastCommitted = UInt64(line.dropFirst("# committed through ".count))
                } else if let seq = line.split(separator: "\t").first.flatMap({ UInt64($0) }) {
                    printedThrough = seq
                }
            }
            let offset = try withEventLog(directory: dir) { log -> UInt64 in
                let consumer = try log.consumer(named: "c")
                let offset = consumer.committed
                // Reading resumes exactly at the offset: no record skipped, none older re-delivered.
                let batch = try consumer.read(maxCount: 5)
                if offset < UInt64(total) { #expect(batch.records.first?.seq == offset, "round \(round)") }
                return offset
            }
            #expect(offset >= previous, "round \(round): the offset never moves backwards")
            if let lastCommitted { #expect(offset >= lastCommitted + 1, "round \(round): a reported commit survives") }
            // Never ahead of what the process had read (a commit follows the printing of its batch).
            #expect(offset <= max(previous, printedThrough.map { $0 + 1 } ?? previous), "round \(round)")
            #expect(offset <= UInt64(total))
            previous = offset
            if offset == UInt64(total) { break }
        }
        #expect(previous > 0, "the consumer made progress")
    }
}
