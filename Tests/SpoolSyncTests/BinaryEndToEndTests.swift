import Foundation
import Spool
import Testing
@testable import SpoolCollector
@testable import SpoolSync

/// Random binary records over real HTTP on 127.0.0.1, through the worker and the reference
/// collector: every record arrives byte for byte, or stays in the dead-letter log byte for
/// byte (issue #21, item 1).
@Suite(.serialized) struct BinaryEndToEndTests {
    typealias Rig = EndToEndTests.Rig

    func append(_ payloads: [[UInt8]], to rig: Rig) async throws {
        var last: UInt64 = 0
        for payload in payloads { last = try rig.log.append(payload) }
        try await rig.log.waitUntil(before: last + 1, is: .written)
    }

    @Test(arguments: HTTPSink.Encoding.allCases, HTTPSink.Compression.allCases)
    func randomBinaryRecordsArriveByteForByte(encoding: HTTPSink.Encoding, compression: HTTPSink.Compression) async throws {
        let rig = try await Rig.make()
        let payloads = BinaryPayloadTests.edgeCases.filter { !$0.isEmpty } + BinaryPayloadTests.randomRecords(300, seed: 7).filter { !$0.isEmpty }
        try await append(payloads, to: rig)
        let worker = try rig.worker {
            $0.http.encoding = encoding
            $0.http.compression = compression
            $0.maxBatchBytes = 16 * 1024  // several batches
        }
        let report = await worker.flush(retries: EndToEndTests.retries)
        #expect(report.failure == nil)
        let received = rig.collector.records()
        #expect(received.map(\.seq) == Array(0..<UInt64(payloads.count)))
        for (record, payload) in zip(received, payloads) {
            #expect(try BinaryPayloadTests.bytes(of: record) == payload, "seq \(record.seq)")
        }
        #expect(received.contains { $0.binary != nil })
        await worker.stop()
        await rig.tearDown()
    }

    /// A refused record that is not UTF-8 keeps its exact bytes in the dead-letter log.
    @Test func aRefusedBinaryRecordKeepsItsBytesInTheDeadLetterLog() async throws {
        let rig = try await Rig.make { $0.poisonMarker = "POISON" }
        let poison: [UInt8] = [0xFF, 0x00, 0xED, 0xA0, 0x80] + Array("POISON".utf8) + [0xC0, 0x80, 0x0A]
        try await append([[0x80, 0x81], poison, [0xFE]], to: rig)
        let worker = try rig.worker()
        let report = await worker.flush(retries: EndToEndTests.retries)
        #expect(report.failure == nil)
        #expect(report.deadLettered == 1)
        #expect(rig.collector.records().map(\.binary) == [[0x80, 0x81], [0xFE]])
        await worker.stop()  // closes the dead-letter log

        let deadLetters = try EventLog.open(directory: DeadLetterLog.directory(logDirectory: rig.directory, consumer: "uploader"))
        let batch = try await deadLetters.consumer(named: "inspect").read(maxCount: 10, maxBytes: 1 << 20)
        #expect(batch.records.count == 1)
        let stored = try OriginRecord.decode(batch.records.first?.payload ?? [])
        #expect(stored.log == rig.log.id && stored.seq == 1)
        #expect(stored.payload == poison)
        try deadLetters.close()
        await rig.tearDown()
    }

    /// `deadletter/` and `deadletter/<consumer>` are the log's own: a symbolic link at either
    /// is refused, and nothing is written where it points.
    @Test(arguments: ["deadletter", "deadletter/uploader"])
    func aDeadLetterDirectoryThatIsASymbolicLinkIsRefused(link: String) async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("spool-dl-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let logDirectory = base + "/log", elsewhere = base + "/elsewhere"
        try FileManager.default.createDirectory(atPath: logDirectory + "/deadletter", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        if link == "deadletter" { try FileManager.default.removeItem(atPath: logDirectory + "/deadletter") }
        try FileManager.default.createSymbolicLink(atPath: logDirectory + "/" + link, withDestinationPath: elsewhere)

        let sink = DeadLetterLog(logDirectory: logDirectory, consumer: "uploader", logID: BinaryPayloadTests.log, configuration: Configuration())
        let record = Record(seq: 0, timestamp: 0, payload: Array("x".utf8))
        await #expect {
            try await sink.store([record], refusedWith: SyncError(.rejected, "refused", status: 400))
        } throws: { error in
            let error = error as? SpoolError
            return error?.code == .io && error?.path == logDirectory + "/" + link && error?.message.contains("symbolic link") == true
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        await sink.shutdown()
    }
}
