import Foundation
import Testing

/// Issue #37: `--json` on `stat`, `verify` and `sync`, and `dump --format json`: every output
/// parses, its fields say what the text says for the same log (a group too), and the exit
/// codes are the text's.
@Suite struct JSONOutputTests {
    /// The one JSON object a command printed.
    static func object(_ text: String) throws -> [String: Any] {
        #expect(text.hasSuffix("\n") && text.dropLast().split(separator: "\n").count == 1, "not one line: \(text)")
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
    }

    /// The number after `label` on a text line that starts with it (`records    42`).
    static func number(after label: String, in text: String) -> Int64? {
        for line in text.split(separator: "\n") where line.hasPrefix(label) {
            return Int64(line.dropFirst(label.count).drop { $0 == " " }.prefix { $0.isNumber })
        }
        return nil
    }

    static func int(_ value: Any?) -> Int64? { (value as? NSNumber)?.int64Value }

    @Test func statAndVerifyJSONSayWhatTheirTextSays() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try ProgressTests.makeLog(dir, count: 3_000)
        #expect(try SpoolBinary.run(["commit", dir, "--consumer", "reader", "--through", "999", "--create"]).status == 0)

        let statText = try SpoolBinary.run(["stat", dir])
        let statJSON = try SpoolBinary.run(["stat", dir, "--json"])
        #expect(statText.status == 0 && statJSON.status == 0)
        let stat = try Self.object(statJSON.stdout)
        #expect(Self.int(stat["records"]) == 3_000)
        #expect(Self.int(stat["records"]) == Self.number(after: "records", in: statText.stdout))
        #expect(Self.int(stat["first_seq"]) == 0 && Self.int(stat["next_seq"]) == 3_000)
        #expect(statText.stdout.contains("seqs 0..<3000"))
        let segments = try #require(stat["segments"] as? [[String: Any]])
        #expect(Int64(segments.count) == Self.number(after: "segments", in: statText.stdout))
        #expect(statText.stdout.contains("segments    \(segments.count), \(Self.int(stat["disk_bytes"]) ?? -1) bytes"), "\(statText.stdout)")
        #expect(statText.stdout.contains("raw         \(Self.int(stat["raw_bytes"]) ?? -1) bytes, ratio \(String(format: "%.2f", stat["compression_ratio"] as? Double ?? -1))"))
        for segment in segments {
            let line = "  \(segment["name"] ?? "")  \(Self.int(segment["bytes"]) ?? -1) bytes  \(Self.int(segment["blocks"]) ?? -1) blocks  seqs \(Self.int(segment["first_seq"]) ?? -1)..<\(Self.int(segment["end_seq"]) ?? -1)"
            #expect(statText.stdout.contains(line), "\(line) not in \(statText.stdout)")
        }
        let consumers = try #require(stat["consumers"] as? [[String: Any]])
        #expect(consumers.count == 1)
        #expect(consumers.first?["name"] as? String == "reader")
        #expect(Self.int(consumers.first?["offset"]) == 1_000 && Self.int(consumers.first?["lag_records"]) == 2_000)
        #expect(statText.stdout.contains("  reader  offset 1000  lag 2000 records"), "\(statText.stdout)")

        let verifyText = try SpoolBinary.run(["verify", dir])
        let verifyJSON = try SpoolBinary.run(["verify", dir, "--json"])
        #expect(verifyText.status == 0 && verifyJSON.status == 0)
        let verify = try Self.object(verifyJSON.stdout)
        #expect(verify["clean"] as? Bool == true)
        for (key, label) in [("records", "records"), ("blocks", "blocks"), ("segments", "segments"), ("disk_bytes", "on disk"), ("raw_bytes", "raw")] {
            #expect(Self.int(verify[key]) == Self.number(after: label, in: verifyText.stdout), "\(key)")
        }
        #expect(verify["log"] as? String == stat["log"] as? String)
        #expect((verify["corrupt"] as? [Any])?.isEmpty == true)
    }

    @Test func verifyJSONOfADamagedLogReportsTheDamageAndExitsOne() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try ProgressTests.makeLog(dir, count: 3_000)
        // Flip a byte in the middle of the (only) segment: a block in the middle is corrupt.
        let segment = try #require(try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasSuffix(".seg") })
        let handle = try #require(FileHandle(forUpdatingAtPath: dir + "/" + segment))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 3)
        let byte = try #require(try handle.read(upToCount: 1)).first ?? 0
        try handle.seek(toOffset: size / 3)
        try handle.write(contentsOf: [byte ^ 0xFF])
        try handle.close()

        let text = try SpoolBinary.run(["verify", dir])
        let json = try SpoolBinary.run(["verify", dir, "--json"])
        #expect(text.status == 1 && json.status == 1, "\(text.stdout) \(json.stdout)")
        let verify = try Self.object(json.stdout)
        #expect(verify["clean"] as? Bool == false)
        let corrupt = try #require(verify["corrupt"] as? [[String: Any]])
        #expect(!corrupt.isEmpty)
        for range in corrupt {
            #expect(range["kind"] as? String == "corrupt")
            #expect(text.stdout.contains("CORRUPT    \(range["message"] as? String ?? "?")"), "\(text.stdout)")
        }
        let lost = corrupt.compactMap { Self.int($0["records"]) }.reduce(0, +)
        #expect(text.stdout.contains("FAILED: \(corrupt.count) corrupt ranges, \(lost) records lost"), "\(text.stdout)")
        #expect(Self.int(verify["records"]) == Self.number(after: "records", in: text.stdout))
    }

    @Test func dumpJSONHasOneObjectPerRecordWithDataOrBase64() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Text, text with a tab and a control character, and bytes that are not UTF-8.
        var input = Data("plain {\"a\":1}\nwith\ttab and \u{1B}[31m escape\n".utf8)
        input.append(contentsOf: [0xFF, 0xFE, 0x41, 0x0A])
        let before = Date()
        #expect(try SpoolBinary.run(["append", dir], input: input).status == 0)
        let text = try SpoolBinary.run(["dump", dir])
        let json = try SpoolBinary.run(["dump", dir, "--format", "json"])
        #expect(text.status == 0 && json.status == 0)
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 3)
        #expect(objects.map { Self.int($0["seq"]) } == [0, 1, 2])
        #expect(objects[0]["data"] as? String == "plain {\"a\":1}" && objects[0]["data_base64"] == nil)
        #expect(objects[1]["data"] as? String == "with\ttab and \u{1B}[31m escape")
        #expect(!json.stdout.contains("\u{1B}"), "an escape reached the output raw")
        #expect(objects[2]["data"] == nil && objects[2]["data_base64"] as? String == Data([0xFF, 0xFE, 0x41]).base64EncodedString())
        // The text dump prints the same records (as base64 where a terminal could be harmed).
        #expect(text.stdout.split(separator: "\n").map { $0.split(separator: "\t", maxSplits: 1).first.map(String.init) } == ["0", "1", "2"])
        #expect(text.stdout.contains("2\tbase64:\(Data([0xFF, 0xFE, 0x41]).base64EncodedString())"))
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for object in objects {
            let time = try #require((object["time"] as? String).flatMap(formatter.date(from:)), "\(object)")
            #expect(abs(time.timeIntervalSince(before)) < 600, "\(object)")
        }
    }

    @Test func aGroupsJSONListsEachWriterAndTheTotals() throws {
        let group = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: group) }
        for (writer, count) in [("app", 40), ("widget", 25)] {
            let lines = (0..<count).map { "\(writer)-\($0)\n" }.joined()
            #expect(try SpoolBinary.run(["append", group, "--writer", writer], input: Data(lines.utf8)).status == 0)
        }
        let statText = try SpoolBinary.run(["stat", group])
        let stat = try Self.object(try SpoolBinary.run(["stat", group, "--json"]).stdout)
        let writers = try #require(stat["writers"] as? [[String: Any]])
        #expect(writers.map { $0["writer"] as? String } == ["app", "widget"])
        #expect(writers.map { Self.int($0["records"]) } == [40, 25])
        let total = try #require(stat["total"] as? [String: Any])
        #expect(Self.int(total["records"]) == 65 && Self.int(total["writers"]) == 2)
        #expect(statText.stdout.contains("total       65 records stored in 2 writer logs, \(Self.int(total["disk_bytes"]) ?? -1) bytes"), "\(statText.stdout)")

        let verify = try Self.object(try SpoolBinary.run(["verify", group, "--json"]).stdout)
        #expect(verify["clean"] as? Bool == true && (verify["damaged"] as? [Any])?.isEmpty == true)
        #expect((verify["writers"] as? [[String: Any]])?.map { Self.int($0["records"]) } == [40, 25])

        let dump = try SpoolBinary.run(["dump", group, "--format", "json"])
        let records = try dump.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(records.count == 65)
        #expect(records.filter { $0["writer"] as? String == "widget" }.map { $0["data"] as? String } == (0..<25).map { "widget-\($0)" })
    }

    @Test func syncJSONSummarySaysWhatTheTextSays() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try ProgressTests.makeLog(dir + "/a", count: 230)
        try ProgressTests.makeLog(dir + "/b", count: 230)
        let collector = try CollectorChild([], stderrPath: dir + "/collector.err")
        defer { collector.stop() }
        let arguments = ["--url", collector.url, "--create", "--once", "--concurrency", "1", "--batch-count", "50"]
        let text = try SpoolBinary.run(["sync", dir + "/a"] + arguments)
        let json = try SpoolBinary.run(["sync", dir + "/b", "--json"] + arguments)
        #expect(text.status == 0 && json.status == 0, "\(text.stderr) \(json.stderr)")
        let summary = try Self.object(json.stdout)
        #expect(Self.int(summary["records"]) == 230 && Self.int(summary["batches"]) == 5)
        #expect(Self.int(summary["lag"]) == 0 && summary["failure"] == nil)
        #expect(Self.int(summary["concurrency_decreases"]) == 0)  // one in flight, fixed
        #expect(text.stdout.hasPrefix("sent \(Self.int(summary["records"]) ?? -1) records in \(Self.int(summary["batches"]) ?? -1) requests"), "\(text.stdout)")
        #expect(text.stdout.contains("; \(Self.int(summary["requests"]) ?? -1) requests made, \(Self.int(summary["retries"]) ?? -1) retried, up to \(Self.int(summary["peak_in_flight"]) ?? -1) in flight"), "\(text.stdout)")

        // A destination that refuses to answer: exit 1 either way, the error in `failure`.
        collector.stop()
        #expect(try SpoolBinary.run(["append", dir + "/b"], input: Data("one more\n".utf8)).status == 0)
        let failed = try SpoolBinary.run(["sync", dir + "/b", "--json", "--retries", "0"] + arguments)
        #expect(failed.status == 1, "\(failed.stdout) \(failed.stderr)")
        let failure = try Self.object(failed.stdout)
        #expect((failure["failure"] as? String)?.isEmpty == false && Self.int(failure["records"]) == 0, "\(failed.stdout)")
    }
}
