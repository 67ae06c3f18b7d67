import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// Starting, stopping, and what is kept when the collector stops.
@Suite struct LifecycleTests {
    @Test func stopLetsRequestsInFlightFinish() async throws {
        let server = try await TestServer.start { $0.faults.latency = .milliseconds(300) }
        let upload = Task { try await server.post(batch: body(.json, seqs: 0...2), seqs: 0...2, format: .json) }
        while server.collector.stats.requests == 0 { try await Task.sleep(for: .milliseconds(5)) }
        await server.collector.stop()

        #expect(try await upload.value.status == 200)
        #expect(server.collector.records().map(\.seq) == [0, 1, 2])
    }

    @Test func requestsAfterStopAreNotServed() async throws {
        let server = try await TestServer.start()
        await server.collector.stop()
        await #expect(throws: (any Error).self) {
            try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        }
        await server.collector.stop()  // a second stop does nothing
    }

    @Test func portInUseFailsStartWithAnIOError() async throws {
        let first = try await TestServer.start()
        var configuration = CollectorConfiguration()
        configuration.port = first.port
        let second = Collector(configuration: configuration)
        await #expect { try await second.start() } throws: { error in
            (error as? SpoolError)?.code == .io
        }
        await first.collector.stop()
    }

    @Test func unwritableOutputPathFailsStart() async throws {
        var configuration = CollectorConfiguration()
        configuration.outputPath = "/nonexistent-directory-\(UUID().uuidString)/out.ndjson"
        let collector = Collector(configuration: configuration)
        await #expect { try await collector.start() } throws: { error in
            (error as? SpoolError)?.path == configuration.outputPath
        }
    }

    @Test func outputFileIsAppendedToNotTruncated() async throws {
        let directory = try temporaryDirectory()
        let path = directory.appendingPathComponent("out.ndjson").path
        try Data("earlier run\n".utf8).write(to: URL(fileURLWithPath: path))
        let server = try await TestServer.start { $0.outputPath = path }
        _ = try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        await server.collector.stop()

        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first == "earlier run")
        try FileManager.default.removeItem(at: directory)
    }

    @Test func recordsAreNotRetainedWhenTurnedOff() async throws {
        let server = try await TestServer.start { $0.retainsRecords = false }
        let answer = try await server.post(batch: body(.json, seqs: 0...4), seqs: 0...4, format: .json)
        await server.collector.stop()
        #expect(answer.status == 200)
        #expect(server.collector.records().isEmpty)
        #expect(server.collector.stats.received == 5)
    }

    @Test func concurrentUploadsFromManyLogsAreAllRecorded() async throws {
        let server = try await TestServer.start()
        let logs = (0..<8).map { String(repeating: String($0), count: 32) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for log in logs {
                group.addTask {
                    for first in stride(from: UInt64(0), to: 50, by: 10) {
                        let answer = try await server.post(batch: body(.ndjson, log: log, seqs: first...first + 9), log: log, seqs: first...first + 9, format: .ndjson)
                        #expect(answer.status == 200)
                    }
                }
            }
            try await group.waitForAll()
        }
        await server.collector.stop()

        let records = server.collector.records()
        #expect(records.count == 400)
        for log in logs {
            #expect(records.filter { $0.logID == log }.map(\.seq) == Array(0..<50))
        }
    }
}
