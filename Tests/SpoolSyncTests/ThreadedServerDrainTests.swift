import Foundation
import Spool
import SpoolServers
import Testing
@testable import SpoolSync

/// Draining to Python's `ThreadingHTTPServer` (``ThreadedServer``): HTTP/1.0, one request per
/// connection, an accept queue of 5 and no 429 or 503, as `compare`'s threaded-server row
/// does (issue 51 §2). Every record must arrive, with one request in flight and adaptive.
@Suite(.serialized) struct ThreadedServerDrainTests {
    /// The row's batch and the records a drain stores: enough batches (100) for connections
    /// to be opened and closed many times over.
    static let batch = 50
    static let count = 5_000

    @Test(arguments: [SyncConfiguration.Concurrency.fixed(1), .adaptive(max: 32)])
    func everyRecordArrives(concurrency: SyncConfiguration.Concurrency) async throws {
        let server = try await ThreadedServer.start()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-threaded-\(UUID().uuidString)").path
        let log = try EventLog.open(directory: directory)
        var last: UInt64 = 0
        for index in 0..<Self.count { last = try log.append(Array(#"{"n":\#(index),"event":"screen_view"}"#.utf8)) }
        try await log.waitUntil(before: last + 1, is: .written)
        // The benchmark's configuration: the library's defaults, batches of 50.
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = Self.batch
        configuration.maxBatchBytes = max(configuration.maxBatchBytes, Self.batch * 1024)
        configuration.concurrency = concurrency
        let worker = try SyncWorker(consumer: try log.consumer(named: "uploader"), url: server.url, configuration: configuration)
        // A hang guard only (the drain takes a few seconds), not a measurement.
        let report = await worker.flush(within: .seconds(120), retries: 1_000)
        let received = try await server.received()
        await worker.stop()
        // Stopping must end it: a server left running (or waited for forever) held the
        // benchmark for minutes.
        let stopped = await server.stop()
        try? log.close()
        try? FileManager.default.removeItem(atPath: directory)
        #expect(report.failure == nil)
        #expect(report.records == Self.count)
        #expect(received.records == Self.count)
        #expect(stopped, "SIGTERM stops the server")
    }
}
