import Foundation
import Spool
import Testing
@testable import SpoolSync

/// The envelope of a collector's record (``SyncConfiguration/forwardsOrigins``): the
/// collector log's own id, seq and time, then its origin's, then the origin's payload.
@Suite struct OriginEnvelopeTests {
    static let collector = LogID(bytes: Array(0..<16))
    static let device = LogID(bytes: Array(16..<32))

    func stored(_ seq: UInt64, _ origin: OriginRecord) -> Record {
        Record(seq: seq, timestamp: 1_700_000_000_000, payload: origin.encoded())
    }

    func encode(_ records: [Record], _ encoding: HTTPSink.Encoding) -> String {
        let encoder = BatchEncoder(logID: Self.collector, encoding: encoding, forwardsOrigins: true)
        return String(decoding: encoder.encode(records, maxBytes: .max).body, as: UTF8.self)
    }

    @Test func anEnvelopeCarriesItsOriginAndThePayloadAsStored() throws {
        let records = [
            stored(4, OriginRecord(log: Self.device, seq: 90, time: 1_600_000_000_000, payload: Array(#"{"a":[1,2]}"#.utf8))),
            stored(5, OriginRecord(log: Self.device, seq: 91, time: nil, payload: Array(#""text""#.utf8))),
            stored(6, OriginRecord(log: Self.device, seq: 92, time: -3, payload: [0xff, 0x00])),
            stored(7, OriginRecord(log: Self.device, seq: 93, time: 1, payload: Array("not json".utf8))),
        ]
        let (c, d) = (Self.collector.description, Self.device.description)
        #expect(encode(records, .json) == "[" + [
            #"{"id":"\#(c)-4","seq":4,"time":1700000000000,"origin_id":"\#(d)-90","origin_seq":90,"origin_time":1600000000000,"data":{"a":[1,2]}}"#,
            #"{"id":"\#(c)-5","seq":5,"time":1700000000000,"origin_id":"\#(d)-91","origin_seq":91,"data":"text"}"#,
            #"{"id":"\#(c)-6","seq":6,"time":1700000000000,"origin_id":"\#(d)-92","origin_seq":92,"origin_time":-3,"data_base64":"/wA="}"#,
            #"{"id":"\#(c)-7","seq":7,"time":1700000000000,"origin_id":"\#(d)-93","origin_seq":93,"origin_time":1,"data":"not json","data_text":true}"#,
        ].joined(separator: ",") + "]")
        let lines = encode(records, .ndjson).split(separator: "\n")
        #expect(lines.count == 4 && lines[0].hasSuffix(#""data":{"a":[1,2]}}"#))
    }

    @Test func aRecordThatIsNotAnOriginRecordGoesOutAsItIs() {
        let damaged = Record(seq: 3, timestamp: 9, payload: [0xff, 1, 2])
        #expect(encode([damaged], .json) == #"[{"id":"\#(Self.collector)-3","seq":3,"time":9,"data_base64":"/wEC"}]"#)
    }

    @Test func theRawEncodingIsRefusedForOrigins() {
        var configuration = SyncConfiguration()
        configuration.http.forwardsOrigins = true
        #expect(throws: Never.self) { try configuration.validate() }
        configuration.http.encoding = .raw
        #expect(throws: SyncError.self) { try configuration.validate() }
        let builder = RequestBuilder(logID: Self.collector, configuration: { var c = HTTPSink.Configuration(); c.forwardsOrigins = true; return c }(), timeout: .seconds(30))
        #expect(builder.encoder.forwardsOrigins)
    }
}
