import Foundation
import Testing

/// `spool bench --quick` runs every Spool scenario in seconds and prints the table and the
/// JSON. Never asserts a time: CI machines vary; only that it ran and reported.
@Suite struct BenchCommandTests {
    @Test func quickBenchRunsEveryScenarioAndPrintsATableAndJSON() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let json = dir + "/bench.json"
        let result = try SpoolBinary.run(["bench", "--quick", "--dir", dir, "--json", json])
        #expect(result.status == 0, "\(result.stderr)")
        for group in ["append", "seal", "drain", "open", "footprint", "group"] {
            #expect(result.stdout.contains("\n\(group) "), "no \(group) row in:\n\(result.stdout)")
        }
        #expect(result.stdout.contains("synced ×1"))
        // The serial group-commit ceiling, measured from its parts in the same run.
        #expect(result.stdout.contains("serial ceiling: fdatasync + zstd + 16 tasks' round trip"))
        #expect(result.stdout.contains("latency per call"))

        let data = try #require(FileManager.default.contents(atPath: json))
        let report = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let rows = try #require(report["rows"] as? [[String: Any]])
        #expect(rows.count >= 10)
        #expect(rows.allSatisfy { ($0["spool"] as? [String: Any])?["value"] is Double })
        // The open loop (--quick: 2,000 synced arrivals a second for 0.25 s): every one of the
        // 500 arrivals is timed to its return, none lost, and the note says the offered rate.
        let openLoop = try #require(rows.first { ($0["scenario"] as? String)?.hasPrefix("synced, open loop at 2,000/s, p50") == true },
                                    "no open-loop row in:\n\(result.stdout)")
        let openLoopSpool = try #require(openLoop["spool"] as? [String: Any])
        let samples = (openLoopSpool["latency"] as? [String: Any])?["samples"] as? Int
        #expect(samples == 500)
        #expect((openLoopSpool["note"] as? String)?.hasPrefix("offered 2,000/s") == true)
        #expect(openLoop["baseline"] as? String == "hw: 256 B append+fdatasync, p50")

        // The scratch directory it made under --dir is gone.
        let left = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasPrefix("spool-bench-") }
        #expect(left.isEmpty)
    }
}
