import Foundation
import Testing

/// `spool sync` run as a service (the systemd unit in "Running Spool as a service"): SIGTERM
/// with a request in flight stops it without waiting for the answer, commits nothing the
/// server did not acknowledge, and exits 0.
@Suite struct ServiceStopTests {
    typealias Child = MetricsEndpointTests.Child

    /// Waits for `child` to exit and returns its status; after a minute (a hang guard only) it
    /// is killed and the test fails.
    static func exitStatus(of child: Child) async throws -> Int32? {
        for _ in 0..<600 where child.process.isRunning {
            try await Task.sleep(for: .milliseconds(100))
        }
        guard !child.process.isRunning else {
            kill(child.process.processIdentifier, SIGKILL)
            Issue.record("the process did not exit within a minute")
            return nil
        }
        return child.process.terminationStatus
    }

    @Test func sigtermWithARequestInFlightCommitsNothingAndExitsZero() async throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let lines = (0..<300).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
        #expect(try SpoolBinary.run(["append", log], input: Data(lines.utf8)).status == 0)

        // A collector that holds every request ten minutes before answering it.
        let collector = try Child(["collector", "--port", "0", "--metrics-port", "0", "--latency-ms", "600000"])
        defer { kill(collector.process.processIdentifier, SIGKILL) }
        let dataPort = try collector.port(after: "listening on 127.0.0.1", onStandardError: false)
        let metricsPort = try collector.port(after: "metrics on http://127.0.0.1", onStandardError: true)

        let sync = try Child(["sync", log, "--url", "http://127.0.0.1:\(dataPort)/batch", "--create", "--batch-count", "20"])
        defer { if sync.process.isRunning { kill(sync.process.processIdentifier, SIGKILL) } }
        // The collector counts a request when it arrives, before holding it.
        _ = try await MetricsEndpointTests.scrape(metricsPort, until: "spool_collector_requests_total", reaches: 1)

        sync.process.terminate()
        #expect(try await Self.exitStatus(of: sync) == 0)
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.status == 0)
        #expect(stat.stdout.contains("sync  offset 0  lag 300 records"), "\(stat.stdout)")
    }
}
