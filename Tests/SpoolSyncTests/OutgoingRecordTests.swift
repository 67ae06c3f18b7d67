import Foundation
import Spool
import Testing
@testable import SpoolCollector
@testable import SpoolPostgres
import SpoolPubSub
@testable import SpoolSync

/// A collector's log is unwrapped once (`OutgoingRecord`), so every sink sends the same id, seq,
/// time and bytes for each record, and one policy holds for a record that is not an origin
/// record: it goes out as it is, under the collector log's own id.
@Suite struct OutgoingRecordTests {
    /// What a destination received of one record.
    struct Sent: Equatable, CustomStringConvertible {
        var id: String
        var log: String
        var seq: UInt64
        var time: Int64?
        var bytes: [UInt8]
        var description: String { "\(id) seq \(seq) time \(time.map(String.init) ?? "nil") \(bytes.count) B" }
    }

    static let collector = LogID(bytes: Array(repeating: 0xC0, count: 16))
    static let device = LogID(bytes: Array(repeating: 0xD1, count: 16))
    static let other = LogID(bytes: Array(repeating: 0xE2, count: 16))

    /// A collector log's records: origin records of JSON, binary and text payloads (with and
    /// without a time), and two that do not decode (too short; a version this reader does not know).
    static let records: [Record] = [
        Record(seq: 0, timestamp: 1_700_000_000_000, payload: OriginRecord(log: device, seq: 5, time: 1000, payload: Array(#"{"a":[1,"x"]}"#.utf8)).encoded()),
        Record(seq: 1, timestamp: 1_700_000_000_001, payload: Array("not an origin record".utf8)),
        Record(seq: 2, timestamp: 1_700_000_000_002, payload: OriginRecord(log: device, seq: 6, time: nil, payload: [0xFF, 0xFE, 0x00, 0x80]).encoded()),
        Record(seq: 3, timestamp: 1_700_000_000_003, payload: OriginRecord(log: other, seq: 0, time: -5, payload: Array("plain text".utf8)).encoded()),
        Record(seq: 4, timestamp: 1_700_000_000_004, payload: [9, 0] + Array(repeating: 0, count: 40)),
    ]

    /// What every destination must receive, written out by hand.
    static let expected: [Sent] = [
        Sent(id: device.eventID(seq: 5), log: device.description, seq: 5, time: 1000, bytes: Array(#"{"a":[1,"x"]}"#.utf8)),
        Sent(id: collector.eventID(seq: 1), log: collector.description, seq: 1, time: 1_700_000_000_001, bytes: records[1].payload),
        Sent(id: device.eventID(seq: 6), log: device.description, seq: 6, time: nil, bytes: [0xFF, 0xFE, 0x00, 0x80]),
        Sent(id: other.eventID(seq: 0), log: other.description, seq: 0, time: -5, bytes: Array("plain text".utf8)),
        Sent(id: collector.eventID(seq: 4), log: collector.description, seq: 4, time: 1_700_000_000_004, bytes: records[4].payload),
    ]

    @Test func theAdapterUnwrapsOriginRecordsAndSendsTheOthersAsTheyAre() {
        let outgoing = RecordUnwrapper(logID: Self.collector, origins: true).unwrap(Self.records)
        #expect(outgoing.map { Sent(id: $0.id, log: $0.log.description, seq: $0.seq, time: $0.time, bytes: $0.bytes) } == Self.expected)
        #expect(outgoing.map(\.isOrigin) == [true, false, true, true, false])
        #expect(outgoing.map(\.stored) == Self.records)
        // A log that is not a collector's: every record as it is.
        let own = OutgoingRecord(Self.records[0], logID: Self.collector, origins: false)
        #expect(own.id == Self.collector.eventID(seq: 0) && own.bytes == Self.records[0].payload && !own.isOrigin)
    }

    @Test func theThreeSinksSendTheSameIdSeqTimeAndBytesForAMixedBatch() throws {
        let expected = Self.expected
        #expect(try httpSent { $0.prepare(Self.unwrapped(by: $0.unwrapper)[...], maxBytes: 1 << 20) } == expected)
        #expect(try pubSubSent { $0.prepare(Self.unwrapped(by: $0.unwrapper)[...], maxBytes: 1 << 20) } == expected)
        #expect(try postgresSent { $0.prepare(Self.unwrapped(by: $0.unwrapper)[...], maxBytes: 1 << 20) } == expected)
    }

    /// The records as the worker hands them to a sink that unwraps by `unwrapper` (the three
    /// sinks all name one).
    static func unwrapped(by unwrapper: RecordUnwrapper?) -> [OutgoingRecord] {
        unwrapper?.unwrap(records) ?? []
    }

    /// The records of an HTTP body `prepare` makes, as the reference collector reads them
    /// (each forwarded record under its origin).
    private func httpSent(_ prepare: (HTTPSink) throws -> SinkRequest<UploadRequest>) throws -> [Sent] {
        var configuration = HTTPSink.Configuration()
        configuration.forwardsOrigins = true
        let sink = try HTTPSink(uploader: ScriptedUploader(), logID: Self.collector, configuration: configuration)
        let request = try prepare(sink)
        #expect(request.count == Self.records.count)
        let header = BatchHeader(logID: Self.collector.description, seqs: 0...UInt64(Self.records.count - 1))
        let received = try BatchDecoder.decode(request.body.body, format: .json, header: header)
        return received.map { Sent(id: $0.id, log: $0.logID, seq: $0.seq, time: $0.time, bytes: $0.payload) }
    }

    /// The messages of a Pub/Sub publish body `prepare` makes: attributes and base64 data.
    private func pubSubSent(_ prepare: (PubSubSink) throws -> SinkRequest<PublishRequest>) throws -> [Sent] {
        let sink = try PubSubSink(topic: "projects/p/topics/t", endpoint: URL(string: "http://127.0.0.1:1"), credentials: .unauthenticated,
                                  logID: Self.collector, origins: true, environment: [:])
        let request = try prepare(sink)
        #expect(request.count == Self.records.count)
        struct Body: Decodable {
            struct Message: Decodable { var data: String; var attributes: [String: String] }
            var messages: [Message]
        }
        let body = try JSONDecoder().decode(Body.self, from: Data(request.body.body))
        return try body.messages.map { message in
            let attributes = message.attributes
            return Sent(id: try #require(attributes["id"]), log: try #require(attributes["log"]),
                        seq: try #require(attributes["seq"].flatMap { UInt64($0) }), time: attributes["time"].flatMap { Int64($0) },
                        bytes: Array(try #require(Data(base64Encoded: message.data))))
        }
    }

    /// The rows of a PostgreSQL request `prepare` makes, read back from its six binary arrays.
    private func postgresSent(_ prepare: (PostgresSink) throws -> SinkRequest<PostgresBatch>) throws -> [Sent] {
        let configuration = try PostgresSink.Configuration(url: "postgres://postgres@127.0.0.1:1/postgres", table: "events")
        let sink = try PostgresSink(configuration: configuration, logID: Self.collector, origins: true)
        let request = try prepare(sink)
        #expect(request.count == Self.records.count)
        let columns = request.body.columns.map { Self.elements(of: Array($0.buffer.readableBytesView)) }
        try #require(columns.count == 6 && columns.allSatisfy { $0.count == Self.records.count })
        return try (0..<Self.records.count).map { row in
            let (id, log, seq, time, data, dataBytes) = (columns[0][row], columns[1][row], columns[2][row], columns[3][row], columns[4][row], columns[5][row])
            let micros = time.map { Self.int64($0) }
            return Sent(id: String(decoding: try #require(id), as: UTF8.self), log: String(decoding: try #require(log), as: UTF8.self),
                        seq: UInt64(bitPattern: Self.int64(try #require(seq))),
                        time: micros.map { $0 / 1000 + PostgresBatch.postgresEpochMilliseconds },
                        bytes: try #require(data.map { Array($0.dropFirst()) } ?? dataBytes))  // jsonb: version 1, then the text
        }
    }

    /// The elements of a one-dimensional array in PostgreSQL's binary format (`nil` for null).
    private static func elements(of bytes: [UInt8]) -> [[UInt8]?] {
        func int32(_ at: Int) -> Int { Int(Int32(bitPattern: bytes[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) })) }
        var elements: [[UInt8]?] = []
        var offset = 20  // dimensions, null flag, element type, length, lower bound
        for _ in 0..<int32(12) {
            let length = int32(offset)
            offset += 4
            if length < 0 {
                elements.append(nil)
            } else {
                elements.append(Array(bytes[offset..<offset + length]))
                offset += length
            }
        }
        return elements
    }

    private static func int64(_ bytes: [UInt8]) -> Int64 {
        Int64(bitPattern: bytes.reduce(0) { $0 << 8 | UInt64($1) })
    }
}
