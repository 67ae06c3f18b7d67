import Foundation
import Testing

/// `spool bench --runs 2` with baselines and the HTML report, through the binary: a saved
/// baseline is compared with, a planted regression fails the run, and the report renders in a
/// real browser (headless chromium, from disk) with every chart's points equal to the JSON.
/// Never asserts a time: the verdicts asserted are forced by the saved file, not by the disk.
@Suite struct BenchReportTests {
    /// The groups the runs measure: a few seconds, yet bars with intervals, the open-loop
    /// latency curves and bytes per event.
    static let groups = ["--only", "synced", "--only", "drain"]

    @Test func baselineIsSavedComparedAndARegressionFailsTheRun() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let baselines = dir + "/baselines"
        let first = try SpoolBinary.run(["bench", "--quick", "--runs", "2", "--dir", dir, "--save-baseline", "a",
                                         "--baseline-dir", baselines] + Self.groups)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("median of 2 interleaved run(s)"))
        #expect(first.stdout.contains("saved baseline a in \(baselines)"))
        let file = baselines + "/a.json"
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let saved = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any])
        let environment = try #require((saved["run"] as? [String: Any])?["environment"] as? [String: Any])
        #expect(environment["build"] as? String == "debug" || environment["build"] as? String == "release")
        #expect((environment["cores"] as? Int ?? 0) > 0)
        let rows = try #require(saved["rows"] as? [[String: Any]])
        let samples = rows.compactMap { (($0["spool"] as? [String: Any])?["estimate"] as? [String: Any])?["samples"] as? [Double] }
        #expect(samples.count == rows.count && samples.contains { $0.count == 2 })

        // Against itself: every row has a verdict column, and nothing fails at 1000%.
        let again = try SpoolBinary.run(["bench", "--quick", "--runs", "2", "--dir", dir, "--baseline", "a",
                                         "--baseline-dir", baselines, "--fail-on-regression", "1000"] + Self.groups)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("compared with baseline \"a\" (same environment)"), "\(again.stdout)")
        #expect(again.stdout.contains("vs a"))
        // Every row finds itself in the baseline: no scenario names a figure of its own run.
        #expect(!again.stdout.contains("not in baseline"), "\(again.stdout)")

        // A baseline whose fast drain was 100 times faster: that row regressed, the run fails.
        // Every other drain row of it was 100 times slower, so each must read "improved"
        // whatever the machine's noise does to a two-run comparison.
        var planted = saved
        planted["rows"] = rows.map { row -> [String: Any] in
            guard row["group"] as? String == "drain" || (row["scenario"] as? String)?.hasPrefix("read+encode+commit") == true else { return row }
            let fast = (row["scenario"] as? String)?.hasPrefix("read+encode+commit(fast)") == true
            var row = row
            guard var spool = row["spool"] as? [String: Any], var estimate = spool["estimate"] as? [String: Any],
                  let samples = estimate["samples"] as? [Double] else { return row }
            estimate["samples"] = samples.map { fast ? $0 * 100 : $0 / 100 }
            spool["estimate"] = estimate
            row["spool"] = spool
            return row
        }
        try JSONSerialization.data(withJSONObject: planted).write(to: URL(fileURLWithPath: baselines + "/planted.json"))
        let regressed = try SpoolBinary.run(["bench", "--quick", "--runs", "2", "--dir", dir, "--baseline", "planted",
                                             "--baseline-dir", baselines, "--fail-on-regression", "50", "--only", "drain"])
        #expect(regressed.status == 1, "\(regressed.stdout)\n\(regressed.stderr)")
        let line = try #require(regressed.stdout.split(separator: "\n").first { $0.contains("read+encode+commit(fast)") })
        #expect(line.contains("regressed"), "\(line)")
        #expect(regressed.stdout.contains("or more against planted: drain read+encode+commit(fast)"))
        let others = regressed.stdout.split(separator: "\n").filter { $0.hasPrefix("drain ") && !$0.contains("(fast)") }
        #expect(!others.isEmpty && others.allSatisfy { $0.contains("improved") }, "\(others)")
    }

    @Test func missingOrBadBaselineFailsBeforeAnyRun() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = try SpoolBinary.run(["bench", "--quick", "--dir", dir, "--baseline", "nope", "--baseline-dir", dir])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("no baseline \"nope\" in \(dir) (saved: none)"), "\(missing.stderr)")
        #expect(!missing.stdout.contains("Spool benchmarks"))
        let bad = try SpoolBinary.run(["bench", "--quick", "--dir", dir, "--save-baseline", "../x"])
        #expect(bad.status != 0)
        #expect(bad.stderr.contains("baseline name \"../x\""), "\(bad.stderr)")
    }

    /// The page in headless chromium, drawn against a saved baseline: its script ran without
    /// an error, and every bar, whisker, latency point and before-and-after change read back
    /// from the DOM equals the JSON written beside it. The
    /// screenshot is kept under `.build/test-artifacts/`.
    @Test func reportRendersInABrowserWithTheJSONsData() throws {
        guard let chromium = Self.chromium else {
            Issue.record("chromium is not installed: scripts/setup installs it")
            return
        }
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let report = dir + "/report"
        // A baseline first, so the page also draws the before-and-after chart.
        let baselines = dir + "/baselines"
        let before = try SpoolBinary.run(["bench", "--quick", "--runs", "2", "--dir", dir, "--save-baseline", "before",
                                          "--baseline-dir", baselines] + Self.groups)
        #expect(before.status == 0, "\(before.stderr)")
        let run = try SpoolBinary.run(["bench", "--quick", "--runs", "2", "--dir", dir, "--report", report, "--baseline", "before",
                                       "--baseline-dir", baselines] + Self.groups)
        #expect(run.status == 0, "\(run.stderr)")
        let page = report + "/index.html"
        let html = try String(contentsOfFile: page, encoding: .utf8)
        #expect(!html.contains("http://") && !html.contains("https://") && !html.contains("src="), "the page must not load anything")

        let dom = try Self.browse(chromium, ["--dump-dom", "file://" + page])
        let charts = html.components(separatedBy: "<figure ").count - 1
        #expect(charts >= 3)
        #expect(dom.contains("data-rendered=\"\(charts)\""), "the page's script did not run to its end")
        #expect(!dom.contains("data-error="))

        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report + "/report.json"))) as? [String: Any])
        let rows = try #require(json["rows"] as? [[String: Any]])
        var byKey = [String: [String: Any]]()
        for row in rows {
            byKey[[row["group"] as! String, row["scenario"] as! String, row["baseline"] as? String ?? ""].joined(separator: " | ")] = row
        }
        let points = Self.dataPoints(dom)
        #expect(points.count >= 10)
        var series = Set<String>()
        var changed = Set<String>()
        for point in points {
            let row = try #require(byKey[point.row], "a chart point of no row: \(point.row)")
            series.insert(point.series)
            switch point.series {
            case "spool", "baseline":
                let figure = try #require(row[point.series == "spool" ? "spool" : "baselineFigure"] as? [String: Any])
                if let x = point.x {
                    let curve = try #require((figure["latency"] as? [String: Any])?["curve"] as? [[String: Any]])
                    let percentile = x == "max" ? 100 : Double(x.replacingOccurrences(of: ",", with: ""))!
                    let micros = try #require(curve.first { ($0["percentile"] as? Double) == percentile }?["micros"] as? Double)
                    #expect(Self.same(micros, point.value), "\(point.row) p\(x)")
                } else {
                    #expect(Self.same(figure["value"] as? Double, point.value), "\(point.row) \(point.series)")
                    let estimate = try #require(figure["estimate"] as? [String: Any])
                    #expect(Self.same(estimate["low"] as? Double, point.low) && Self.same(estimate["high"] as? Double, point.high))
                }
            case "change":
                let change = try #require(row["change"] as? [String: Any], "a change bar of a row with no change: \(point.row)")
                #expect(Self.same(change["relative"] as? Double, point.value), "\(point.row) change")
                #expect(Self.same(change["low"] as? Double, point.low) && Self.same(change["high"] as? Double, point.high))
                changed.insert(point.row)
            default:
                Issue.record("unexpected series \(point.series)")
            }
        }
        #expect(series == ["spool", "baseline", "change"])
        // The before-and-after chart has a bar for every row the baseline also holds.
        #expect(changed == Set(byKey.filter { $0.value["change"] != nil }.keys) && !changed.isEmpty)
        #expect(html.contains("Before (baseline before) and after"))
        #expect(points.contains { $0.x != nil }, "no latency curve")

        let artifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../.build/test-artifacts").standardized.path
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let screenshot = artifacts + "/bench-report.png"
        try? FileManager.default.removeItem(atPath: screenshot)
        _ = try Self.browse(chromium, ["--screenshot=" + screenshot, "--window-size=412,2400", "file://" + page])
        let png = try #require(FileManager.default.contents(atPath: screenshot))
        #expect(png.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        print("bench report screenshot: \(screenshot)")
    }

    /// Equal but for the last bits Foundation's JSON parser loses on Linux.
    static func same(_ a: Double?, _ b: Double?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    }

    static var chromium: String? {
        ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs headless chromium with `arguments`, killed after 60 s; its standard output.
    static func browse(_ chromium: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        let profile = temporaryDirectory("chromium-profile")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        process.arguments = ["--headless", "--disable-gpu", "--no-sandbox", "--no-first-run", "--user-data-dir=" + profile] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        #expect(process.terminationStatus == 0, "chromium \(arguments) exited \(process.terminationStatus)")
        return String(decoding: data, as: UTF8.self)
    }

    struct Point {
        var row: String, series: String, value: Double, low: Double?, high: Double?, x: String?
    }

    /// Every element with `data-series` in `dom`, with its data attributes (HTML-unescaped).
    static func dataPoints(_ dom: String) -> [Point] {
        let element = #/<(?:rect|circle)\b([^>]*\bdata-series="[^"]*"[^>]*)>/#
        return dom.matches(of: element).compactMap { match in
            let attributes = String(match.1)
            func attribute(_ name: String) -> String? {
                guard let range = attributes.range(of: " \(name)=\"") else { return nil }
                let rest = attributes[range.upperBound...]
                return String(rest[..<rest.firstIndex(of: "\"")!])
                    .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&lt;", with: "<")
                    .replacingOccurrences(of: "&gt;", with: ">").replacingOccurrences(of: "&amp;", with: "&")
            }
            guard let row = attribute("data-row"), let series = attribute("data-series"),
                  let value = attribute("data-value").flatMap(Double.init) else { return nil }
            return Point(row: row, series: series, value: value, low: attribute("data-low").flatMap(Double.init),
                         high: attribute("data-high").flatMap(Double.init), x: attribute("data-x"))
        }
    }
}
