import Foundation
import Testing

/// Issue #37: `spool append` gathers what a steady producer sends within `--linger` before it
/// writes, so its blocks are full; every record is still acknowledged before input ends; and
/// every acknowledged record survives SIGKILL with the linger in place.
@Suite struct AppendLingerTests {
    /// A line of about 190 bytes, different for each `index`.
    static func line(_ index: Int) -> String {
        let pad = String(repeating: "abcdefghij", count: 12)
        return "{\"seq\":\(index),\"event\":\"page_view\",\"user\":\"u\(index % 977)\",\"path\":\"/products/\(index % 5000)\",\"pad\":\"\(pad)\"}\n"
    }

    /// `spool append dir arguments…` fed one line per write, `pause` apart, by a thread, with
    /// its standard output (the acknowledgements) read as it comes.
    final class SlowProducer: @unchecked Sendable {
        let process = Process()
        private let input = Pipe()
        private let output = Pipe()

        init(_ dir: String, _ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            process.arguments = ["append", dir] + arguments
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        func send(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }
        func close() { try? input.fileHandleForWriting.close() }
        /// The next acknowledgement line (blocks until it comes or output ends).
        func nextAck() -> String { nextLine(of: output) }
        func rest() -> String { String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
    }

    @Test func aSlowProducersLogHoldsFewFullBlocks() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 3,000 lines one write each, 200 µs apart: the appender reads them a line or two at a
        // time. A linger longer than the whole run gathers them all, so the blocks are those a
        // file of the same lines makes.
        let producer = try SlowProducer(dir + "/piped", ["--linger", "5000"])
        for index in 0..<3_000 {
            producer.send(Self.line(index))
            usleep(200)
        }
        producer.close()
        producer.process.waitUntilExit()
        #expect(producer.process.terminationStatus == 0)
        let stat = try JSONOutputTests.object(try SpoolBinary.run(["stat", dir + "/piped", "--json"]).stdout)
        let blocks = (stat["segments"] as? [[String: Any]])?.compactMap { JSONOutputTests.int($0["blocks"]) }.reduce(0, +) ?? -1
        let raw = JSONOutputTests.int(stat["raw_bytes"]) ?? 0
        #expect(JSONOutputTests.int(stat["records"]) == 3_000)
        // A block is sealed once it holds 64 KiB (raw, with the records' framing): every block
        // full but the last.
        #expect(blocks >= 1 && blocks <= raw / (64 * 1024) + 1, "\(blocks) blocks for \(raw) raw bytes")
    }

    @Test func eachRecordIsAcknowledgedWithinTheLingerNotAtTheEndOfInput() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let producer = try SlowProducer(dir, ["--ack", "--linger", "50"])
        // Each line waits for its acknowledgement while input stays open: without a bounded
        // linger the first would never come.
        for index in 0..<5 {
            producer.send(Self.line(index))
            #expect(producer.nextAck() == "\(index)\n")
        }
        producer.close()
        #expect(producer.rest().isEmpty)
        producer.process.waitUntilExit()
        #expect(producer.process.terminationStatus == 0)
        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.stdout.split(separator: "\n").count == 5)
    }

    @Test(arguments: ["written", "synced"])
    func everyAcknowledgedRecordSurvivesSIGKILLWithALongLinger(durability: String) throws {
        let seed = UInt64(Date().timeIntervalSince1970)
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A linger of 40 ms in rounds of up to 150 ms: most kills land inside a linger, with
        // records read, appended and not yet acknowledged.
        let result = try SpoolBinary.run(["crash-test", "--rounds", "15", "--seed", "\(seed)", "--durability", durability,
                                          "--linger", "40", "--dir", dir])
        #expect(result.status == 0, "seed \(seed): \(result.stdout.suffix(2000)) \(result.stderr.suffix(500))")
        #expect(result.stdout.contains("15 passed, 0 failed"), "seed \(seed): \(result.stdout.suffix(2000))")
    }
}
