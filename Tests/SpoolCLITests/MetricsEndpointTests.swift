import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `--metrics-port`: `spool sync` and `spool collector` serve their counters in Prometheus'
/// text format over real HTTP, and the counters move as records flow.
@Suite struct MetricsEndpointTests {
    /// A `spool` child whose standard output and error are searched as they arrive.
    final class Child {
        let process = Process()
        private let output = Pipe()
        private let errors = Pipe()

        init(_ arguments: [String]) throws {
            process.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            process.arguments = arguments
            process.standardOutput = output
            process.standardError = errors
            try process.run()
        }

        /// The port in the first match of `pattern` (ending in `:PORT`) on standard output or error.
        func port(after pattern: String, onStandardError: Bool) throws -> Int {
            let handle = (onStandardError ? errors : output).fileHandleForReading
            var text = ""
            while true {
                if let range = text.range(of: pattern + ":[0-9]+", options: .regularExpression),
                   let port = Int(text[range].split(separator: ":").last ?? "") {
                    return port
                }
                let chunk = handle.availableData
                guard !chunk.isEmpty else {
                    Issue.record("no '\(pattern)' in: \(text)")
                    throw CancellationError()
                }
                text += String(decoding: chunk, as: UTF8.self)
            }
        }

        /// Sends SIGTERM and returns the exit status.
        func terminate() -> Int32 {
            process.terminate()
            process.waitUntilExit()
            return process.terminationStatus
        }
    }

    /// The value of the first sample line starting with `prefix`.
    static func sample(_ prefix: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }
    }

    static func scrape(_ port: Int) async throws -> String {
        let (data, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)/metrics")!)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.value(forHTTPHeaderField: "Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
        return String(decoding: data, as: UTF8.self)
    }

    /// Scrapes until the sample `prefix` reaches `value` (the figures move as the sync runs);
    /// gives up after a minute, a hang guard only.
    static func scrape(_ port: Int, until prefix: String, reaches value: Double) async throws -> String {
        var text = ""
        for _ in 0..<600 {
            text = try await scrape(port)
            if let sample = sample(prefix, in: text), sample >= value { return text }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("\(prefix) never reached \(value): \(text.prefix(2000))")
        return text
    }

    @Test func syncAndCollectorServeCountersThatMove() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let lines = (0..<300).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
        #expect(try SpoolBinary.run(["append", log], input: Data(lines.utf8)).status == 0)

        let collector = try Child(["collector", "--port", "0", "--metrics-port", "0"])
        defer { if collector.process.isRunning { collector.process.terminate() } }
        let dataPort = try collector.port(after: "listening on 127.0.0.1", onStandardError: false)
        let collectorMetrics = try collector.port(after: "metrics on http://127.0.0.1", onStandardError: true)
        #expect(Self.sample("spool_collector_records_total", in: try await Self.scrape(collectorMetrics)) == 0)

        // A running sync (a service, not --once) sends what is pending at launch.
        let sync = try Child([
            "sync", log, "--url", "http://127.0.0.1:\(dataPort)/batch", "--create", "--metrics-port", "0", "--batch-count", "20",
        ])
        defer { if sync.process.isRunning { sync.process.terminate() } }
        let syncMetrics = try sync.port(after: "metrics on http://127.0.0.1", onStandardError: true)
        let syncText = try await Self.scrape(syncMetrics, until: #"spool_sync_records_total{consumer="sync"}"#, reaches: 300)
        #expect(Self.sample(#"spool_sync_records_total{consumer="sync"}"#, in: syncText) == 300)
        #expect(Self.sample(#"spool_sync_uploads_total{consumer="sync",outcome="accepted"}"#, in: syncText) == 15)
        #expect(Self.sample(#"spool_sync_pending{consumer="sync"}"#, in: syncText) == 0)
        #expect(Self.sample("spool_segments{log=", in: syncText).map { $0 >= 1 } == true)  // the log as opened
        #expect(syncText.contains("# TYPE spool_sync_records_total counter"))

        let collectorText = try await Self.scrape(collectorMetrics, until: "spool_collector_records_total", reaches: 300)
        #expect(Self.sample("spool_collector_records_total", in: collectorText) == 300)
        #expect(Self.sample("spool_collector_accepted_batches_total", in: collectorText) == 15)

        // SIGTERM: the service stops, commits nothing unacknowledged, and exits 0.
        #expect(sync.terminate() == 0)
        #expect(collector.terminate() == 0)
    }

    @Test func aMetricsPortOutOfRangeIsAUsageError() throws {
        let result = try SpoolBinary.run(["collector", "--metrics-port", "70000"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("--metrics-port must be between 0 and 65535"))
    }
}
