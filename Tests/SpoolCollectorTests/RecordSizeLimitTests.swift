import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// `CollectorConfiguration.maxRecordBytes`: a collector refuses a record it could never
/// forward (issue #33: a gzip body carrying a 60 MB record was answered 200 and stored, and
/// its forwarder then failed for ever).
@Suite struct RecordSizeLimitTests {
    /// A batch of one JSON string record whose text, quotes included, is `size` bytes.
    func batch(size: Int) -> [UInt8] {
        body(.json, [(0, "\"" + String(repeating: "x", count: size - 2) + "\"")])
    }

    @Test func aGzipBodyCarryingARecordPastSpoolsLimitIsAnswered413() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("log").path
        let server = try await TestServer.start { $0.logDirectory = logPath }
        #expect(server.collector.configuration.maxRecordBytes == Configuration().maxRecordSize)
        let limit = Configuration().maxRecordSize
        // Well within the body limits (16 MiB sent, 64 MiB decompressed), not the record limit.
        let refused = try await server.post(batch: gzip(batch(size: 8 * limit)), seqs: 0...0, format: .json, coding: "gzip")
        #expect(refused.status == 413)
        #expect(refused.body.contains("record 0 (seq 0) is \(8 * limit) bytes, larger than this collector's limit of \(limit) bytes"), "\(refused.body)")
        #expect(server.collector.records().isEmpty)
        await server.collector.stop()
        let stored = try withEventLog(directory: logPath) { log in try log.readAll().count }
        #expect(stored == 0)
    }

    @Test(arguments: TestFormat.allCases)
    func recordsUpToTheLimitAreTakenAndOneByteMoreIsNot(format: TestFormat) async throws {
        let server = try await TestServer.start { $0.maxRecordBytes = 1000 }
        let at = body(format, [(0, "\"" + String(repeating: "x", count: 998) + "\"")])
        let past = body(format, [(1, "\"" + String(repeating: "x", count: 999) + "\"")])
        #expect(try await server.post(batch: at, seqs: 0...0, format: format).status == 200)
        #expect(try await server.post(batch: past, seqs: 1...1, format: format).status == 413)
        #expect(server.collector.records().map(\.seq) == [0])
        await server.collector.stop()
    }

    @Test func aLimitTheLogCannotHoldIsRefused() {
        var configuration = CollectorConfiguration()
        configuration.logDirectory = "/tmp/unused"
        configuration.maxRecordBytes = configuration.logConfiguration.maxRecordSize
        #expect(throws: SpoolError.self) { try configuration.validate() }
        configuration.maxRecordBytes = configuration.logConfiguration.maxRecordSize - OriginRecord.headerSize
        #expect(throws: Never.self) { try configuration.validate() }
        configuration.maxRecordBytes = 0
        #expect(throws: SpoolError.self) { try configuration.validate() }
    }
}
