import Foundation
import Spool
import Testing
@testable import SpoolSync

/// The dead-letter log's layout (FORMAT.md §11): each refused record as an origin record of
/// its exact bytes, within the record limit whatever the bytes are (issue #33).
@Suite struct DeadLetterLogTests {
    static let source = LogID(bytes: Array(0..<16))
    static let refusal = SyncError(.rejected, "refused", status: 400)

    /// A scratch directory holding a log directory `log`, removed by `body`'s end.
    func withScratch(_ body: (String) async throws -> Void) async throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("spool-dl-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: base + "/log", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: base) }
        try await body(base + "/log")
    }

    /// The payloads of the dead-letter log of consumer `c` in `logDirectory`.
    func stored(_ logDirectory: String) throws -> [[UInt8]] {
        try withEventLog(directory: DeadLetterLog.directory(logDirectory: logDirectory, consumer: "c")) { log in
            try log.readAll().compactMap { item -> [UInt8]? in
                if case .record(let record) = item { return record.payload }
                return nil
            }
        }
    }

    /// The largest record the source takes, of bytes JSON must escape six-fold (`\u0001`):
    /// stored as it is, 38 bytes more, within the dead-letter log's limit.
    @Test func aRecordAtTheSourcesLimitOfControlCharactersFits() async throws {
        try await withScratch { directory in
            let configuration = Configuration()
            let payload = [UInt8](repeating: 0x01, count: configuration.maxRecordSize)
            let sink = DeadLetterLog(logDirectory: directory, consumer: "c", logID: Self.source,
                                     configuration: DeadLetterLog.configuration(from: configuration))
            try await sink.store([Record(seq: 9, timestamp: 1_767_225_600_000, payload: payload)], refusedWith: Self.refusal)
            await sink.shutdown()
            let records = try stored(directory)
            #expect(records.count == 1)
            #expect(records.first?.count == payload.count + OriginRecord.headerSize)
            let origin = try OriginRecord.decode(records.first ?? [])
            #expect(origin.id == Self.source.eventID(seq: 9) && origin.time == 1_767_225_600_000)
            let exact = origin.payload == payload
            #expect(exact, "the exact bytes (not printed: a megabyte)")
            #expect(OriginRecord.storesOrigins(at: DeadLetterLog.directory(logDirectory: directory, consumer: "c")))
        }
    }

    /// A collector's log holds origin records: the refused one is kept as it is, with the
    /// device's identity (not wrapped in the collector log's).
    @Test func aCollectorsRefusedRecordKeepsItsDevicesIdentity() async throws {
        try await withScratch { directory in
            try withEventLog(directory: directory) { try OriginRecord.markStoresOrigins($0) }
            let device = OriginRecord(log: LogID(bytes: Array(repeating: 0xAB, count: 16)), seq: 42, time: nil, payload: Array("plain".utf8))
            let sink = DeadLetterLog(logDirectory: directory, consumer: "c", logID: Self.source, configuration: Configuration())
            try await sink.store([Record(seq: 3, timestamp: 5, payload: device.encoded())], refusedWith: Self.refusal)
            // Damage in a collector's log (not an origin record) is wrapped like any record.
            try await sink.store([Record(seq: 4, timestamp: 6, payload: [0xFF])], refusedWith: Self.refusal)
            await sink.shutdown()
            let records = try stored(directory).map(OriginRecord.decode)
            #expect(records == [device, OriginRecord(log: Self.source, seq: 4, time: 6, payload: [0xFF])])
        }
    }

    /// A dead-letter log of JSON envelopes (written before this layout) is kept, unmarked:
    /// its old records stay readable and new ones are added after them.
    @Test func anEarlierDeadLetterLogOfEnvelopesIsAppendedToUnmarked() async throws {
        try await withScratch { directory in
            let deadLetters = DeadLetterLog.directory(logDirectory: directory, consumer: "c")
            let envelope = Array(#"{"id":"x-1","seq":1,"time":0,"status":400,"data":{}}"#.utf8)
            try FileManager.default.createDirectory(atPath: deadLetters, withIntermediateDirectories: true)
            try withEventLog(directory: deadLetters) { _ = try $0.append(envelope) }
            let sink = DeadLetterLog(logDirectory: directory, consumer: "c", logID: Self.source, configuration: Configuration())
            try await sink.store([Record(seq: 2, timestamp: 0, payload: [0x7B])], refusedWith: Self.refusal)
            await sink.shutdown()
            #expect(!OriginRecord.storesOrigins(at: deadLetters))
            let records = try stored(directory)
            #expect(records.first == envelope)
            #expect(try records.last.map(OriginRecord.decode) == OriginRecord(log: Self.source, seq: 2, time: 0, payload: [0x7B]))
        }
    }
}
