import Foundation
import Testing

/// Issue 50, item 1: a sync that skips records the log cannot read says so, everywhere. The
/// log: five blocks of 100 records, block 2 damaged (``DamagedLog``). Before, `sync --once`
/// stored 400 records, committed to 500, printed `records 400, lag 0` and exited 0, the only
/// trace a warning on standard error.
@Suite struct SyncDamageTests {
    /// A log damaged as ``DamagedLog`` makes (or a group whose writer `widget` is, with
    /// `group`), and an honest collector, in a directory of the test's own.
    final class Setup {
        let dir: String, log: String, out: String
        let segment: String
        let collector: CollectorChild

        init(group: Bool = false, _ name: String = #function) throws {
            dir = temporaryDirectory(name)
            log = dir + (group ? "/group" : "/log")
            out = dir + "/out.ndjson"
            segment = try DamagedLog.make(log, writer: group ? "widget" : nil)
            collector = try CollectorChild(["--out", out], stderrPath: dir + "/collector.err")
        }

        func tearDown() {
            collector.stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// The JSON object on standard output.
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
    }

    /// The lines of `deadletter/sync.damaged` under `log`, each a JSON object.
    static func damageRecords(_ log: String) throws -> [[String: Any]] {
        let path = log + "/deadletter/sync.damaged"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(mode?.uint16Value == 0o600)
        return try text.split(separator: "\n").map { try json(String($0)) }
    }

    /// What the collector stored: one line a record.
    static func received(_ path: String) -> Int {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    @Test func onceSkipsTheDamagedRangeAndSaysSoInTextJSONAndTheDamageRecord() throws {
        let setup = try Setup()
        defer { setup.tearDown() }
        let (log, out, segment, collector) = (setup.log, setup.out, setup.segment, setup.collector)

        let sync = try SpoolBinary.run(["sync", log, "--url", collector.url, "--create", "--once", "--json"])
        #expect(sync.status == 3, "exit 3: delivered, but damaged records were skipped; \(sync.stderr)")
        let summary = try Self.json(sync.stdout)
        #expect(summary["records"] as? Int == 400)
        #expect(summary["lag"] as? Int == 0)
        let damaged = try #require(summary["damaged"] as? [String: Any], "\(sync.stdout)")
        #expect(damaged["records"] as? Int == 100)
        #expect(damaged["range_count"] as? Int == 1)
        let range = try #require((damaged["ranges"] as? [[String: Any]])?.first)
        #expect(range["first_seq"] as? Int == 100 && range["end_seq"] as? Int == 200 && range["segment"] as? String == segment, "\(range)")
        #expect(sync.stderr.contains("error") && sync.stderr.contains("damaged"), "logged at error level: \(sync.stderr)")
        #expect(sync.stderr.contains("skipped 100 records the log cannot read (damaged), in 1 range; recorded in \(log)/deadletter/sync.damaged"), "\(sync.stderr)")

        // The durable record: consumer, range, segment, reason, time.
        let records = try Self.damageRecords(log)
        #expect(records.count == 1)
        let record = try #require(records.first)
        #expect(record["consumer"] as? String == "sync" && record["first_seq"] as? Int == 100 && record["end_seq"] as? Int == 200)
        #expect(record["segment"] as? String == segment && (record["reason"] as? String)?.isEmpty == false)
        #expect((record["time"] as? String)?.hasSuffix("Z") == true, "\(record)")
        #expect(Self.received(out) == 400)

        // The next run finds nothing left, and exits 0: the damage was passed and recorded.
        let again = try SpoolBinary.run(["sync", log, "--url", collector.url, "--once"])
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        #expect(try Self.damageRecords(log).count == 1)
    }

    @Test func onceInTextNamesTheDamagedRange() throws {
        let setup = try Setup()
        defer { setup.tearDown() }
        let (log, collector) = (setup.log, setup.collector)
        let sync = try SpoolBinary.run(["sync", log, "--url", collector.url, "--create", "--once"])
        #expect(sync.status == 3, "\(sync.stderr)")
        #expect(sync.stdout.contains("sent 400 records"), "\(sync.stdout)")
        #expect(sync.stdout.contains("DAMAGED: 100 records the log cannot read were skipped (100-199)"), "\(sync.stdout)")
    }

    @Test func onDamageStopCommitsUpToTheDamageAndStops() throws {
        let setup = try Setup()
        defer { setup.tearDown() }
        let (log, collector) = (setup.log, setup.collector)
        let sync = try SpoolBinary.run(["sync", log, "--url", collector.url, "--create", "--once", "--json", "--on-damage", "stop"])
        #expect(sync.status == 3, "\(sync.stdout) \(sync.stderr)")
        let summary = try Self.json(sync.stdout)
        #expect(summary["records"] as? Int == 100)
        #expect((summary["failure"] as? String)?.contains("100..<200") == true, "\(sync.stdout)")
        #expect((summary["damaged"] as? [String: Any])?["records"] as? Int == 0, "nothing skipped")
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.stdout.contains("sync  offset 100 "), "committed up to the damage, not past: \(stat.stdout)")
        #expect(!FileManager.default.fileExists(atPath: log + "/deadletter/sync.damaged"))
        // Again: it stops at the same place.
        let again = try SpoolBinary.run(["sync", log, "--url", collector.url, "--once", "--on-damage", "stop"])
        #expect(again.status == 3, "\(again.stdout) \(again.stderr)")
        #expect(try SpoolBinary.run(["stat", log]).stdout.contains("sync  offset 100 "))
    }

    @Test func aRunningSyncLogsCountsAndKeepsGoing() async throws {
        let setup = try Setup()
        defer { setup.tearDown() }
        let (log, collector) = (setup.log, setup.collector)
        let sync = try MetricsEndpointTests.Child(["sync", log, "--url", collector.url, "--create", "--sidecar", "--metrics-port", "0"])
        defer { if sync.process.isRunning { sync.process.terminate() } }
        let port = try sync.port(after: "metrics on http://127.0.0.1", onStandardError: true)
        let text = try await MetricsEndpointTests.scrape(port, until: #"spool_sync_damaged_records_total{consumer="sync"}"#, reaches: 100)
        #expect(MetricsEndpointTests.sample(#"spool_sync_damaged_records_total{consumer="sync"}"#, in: text) == 100)
        #expect(MetricsEndpointTests.sample(#"spool_sync_damaged_ranges_total{consumer="sync"}"#, in: text) == 1)
        _ = try await MetricsEndpointTests.scrape(port, until: #"spool_sync_records_total{consumer="sync"}"#, reaches: 400)
        #expect(try Self.damageRecords(log).count == 1)

        // It keeps going: records appended after the damage are delivered too.
        #expect(try SpoolBinary.run(["append", log], input: Data(#"{"n":500}"#.utf8 + [0x0A])).status == 0)
        let later = try await MetricsEndpointTests.scrape(port, until: #"spool_sync_records_total{consumer="sync"}"#, reaches: 401)
        #expect(MetricsEndpointTests.sample(#"spool_sync_records_total{consumer="sync"}"#, in: later) == 401)
        #expect(sync.terminate() == 3, "a run that skipped damage exits 3 when interrupted")
    }

    @Test func aGroupReportsTheDamagedWriterLog() throws {
        let setup = try Setup(group: true)
        defer { setup.tearDown() }
        let (group, out, collector) = (setup.log, setup.out, setup.collector)
        let intact = (0..<200).map { #"{"w":\#($0)}"# }.joined(separator: "\n") + "\n"
        #expect(try SpoolBinary.run(["append", group, "--writer", "app"], input: Data(intact.utf8)).status == 0)

        let json = try SpoolBinary.run(["sync", group, "--group", "--url", collector.url, "--once", "--json"])
        #expect(json.status == 3, "\(json.stdout) \(json.stderr)")
        let summary = try Self.json(json.stdout)
        let writers = try #require(summary["writers"] as? [[String: Any]])
        let widget = try #require(writers.first { $0["writer"] as? String == "widget" }, "\(json.stdout)")
        let app = try #require(writers.first { $0["writer"] as? String == "app" })
        #expect(widget["records"] as? Int == 400)
        #expect((widget["damaged"] as? [String: Any])?["records"] as? Int == 100, "\(widget)")
        #expect((app["damaged"] as? [String: Any])?["records"] as? Int == 0)
        #expect(((summary["total"] as? [String: Any])?["damaged"] as? [String: Any])?["records"] as? Int == 100)
        #expect(Self.received(out) == 600)
        #expect(try Self.damageRecords(group + "/writers/widget").count == 1)
    }

    @Test func aGroupInTextNamesTheDamagedWriterLog() throws {
        let setup = try Setup(group: true)
        defer { setup.tearDown() }
        let (group, collector) = (setup.log, setup.collector)
        let text = try SpoolBinary.run(["sync", group, "--group", "--url", collector.url, "--once"])
        #expect(text.status == 3, "\(text.stdout) \(text.stderr)")
        #expect(text.stdout.contains("writer widget: sent 400 records"), "\(text.stdout)")
        #expect(text.stdout.contains("DAMAGED: 100 records the log cannot read were skipped (100-199)"), "\(text.stdout)")
    }
}
