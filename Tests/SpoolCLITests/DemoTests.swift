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
}
