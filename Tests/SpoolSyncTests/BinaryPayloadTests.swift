import Foundation
import Spool
import Testing
@testable import SpoolCollector
@testable import SpoolSync

/// Records that are not valid UTF-8 reach the server byte for byte (issue #21, item 1): the
/// encoder sends them as `data_base64`, the collector decodes and stores exactly those bytes.
@Suite struct BinaryPayloadTests {
    static let log = LogID(bytes: Array(0..<16))

    /// Byte sequences a UTF-8 check must refuse, and a few it must keep.
    static let edgeCases: [[UInt8]] = [
        Array(0...255),                          // every byte value
        Array("caf".utf8) + [0xE9],              // Latin-1
        [0xFF, 0xFE, 0x00] + Array("bin".utf8),  // a BOM-like start and NUL
        [0x00], [0x80], [0xBF], [0xC0], [0xFE], [0xFF],
        [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],  // lone surrogates, UTF-8 form (CESU)
        [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80],    // a surrogate pair as two sequences
        [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xF0, 0x80, 0x80, 0x80],  // overlong forms
        [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80],  // past U+10FFFF
        [0xE2, 0x82], [0xF0, 0x9F, 0x98],        // truncated sequences
        Array("{\"a\":\"".utf8) + [0xFF] + Array("\"}".utf8),  // JSON but for one byte
        Array("plain \"text\"\n\t\\".utf8) + [0x00, 0x1F, 0x7F],  // valid UTF-8, not JSON
        Array("é ☃ 😀".utf8) + [0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBF],  // U+FFFD and U+FFFF themselves
        [],
    ]

    /// `count` random records of 0 to 300 bytes (a fixed seed), none of them a JSON text: those
    /// travel as JSON values (EncoderTests), not as bytes. `avoiding` bytes never occur.
    static func randomRecords(_ count: Int, seed: UInt64, avoiding: Set<UInt8> = []) -> [[UInt8]] {
        var random = SplitMix64(seed: seed)
        var records: [[UInt8]] = []
        while records.count < count {
            let length = Int(random.next() % 301)
            let record = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }.filter { !avoiding.contains($0) }
            if !record.withUnsafeBufferPointer(JSONValidator.isValid) { records.append(record) }
        }
        return records
    }

    /// The bytes a server gets back from a received record: the decoded base64, the value of a
    /// JSON string marked `data_text`, or the JSON text itself.
    static func bytes(of record: ReceivedRecord) throws -> [UInt8] {
        if let binary = record.binary { return binary }
        if let text = record.text { return Array(text.utf8) }
        return Array(try #require(record.data).utf8)
    }

    static func records(_ payloads: [[UInt8]]) -> [Record] {
        payloads.enumerated().map { Record(seq: UInt64($0.offset), timestamp: 1_700_000_000_000, payload: $0.element) }
    }

    @Test(arguments: HTTPSink.Encoding.allCases)
    func everyRecordRoundTripsThroughTheCollectorsDecoderByteForByte(encoding: HTTPSink.Encoding) throws {
        let payloads = Self.edgeCases + Self.randomRecords(500, seed: 21)
        let (body, count) = BatchEncoder(logID: Self.log, encoding: encoding).encode(Self.records(payloads), maxBytes: .max)
        #expect(count == payloads.count)
        let format: BatchFormat = switch encoding {
        case .json: .json
        case .ndjson: .ndjson
        case .raw: .raw
        }
        let header = BatchHeader(logID: Self.log.description, seqs: 0...UInt64(payloads.count - 1))
        let received = try BatchDecoder.decode(body, format: format, header: header)
        #expect(received.map(\.seq) == Array(0..<UInt64(payloads.count)))
        for (record, payload) in zip(received, payloads) {
            #expect(try Self.bytes(of: record) == payload, "seq \(record.seq)")
            // Only what is not UTF-8 goes as base64 in an envelope; text stays readable. Raw
            // has no envelope to mark text in: every record here (none is JSON) is base64.
            #expect((record.binary != nil) == (encoding == .raw || String(validating: payload, as: UTF8.self) == nil), "seq \(record.seq)")
        }
    }

    /// What any JSON parser sees: valid JSON, `data_base64` in place of `data` (never both),
    /// standard base64 of the exact bytes, and no U+FFFD that the record did not hold.
    @Test(arguments: [HTTPSink.Encoding.json, .ndjson])
    func envelopesCarryDataBase64InPlaceOfData(encoding: HTTPSink.Encoding) throws {
        let payloads = Self.edgeCases
        let (body, _) = BatchEncoder(logID: Self.log, encoding: encoding).encode(Self.records(payloads), maxBytes: .max)
        let envelopes: [[String: Any]]
        if encoding == .json {
            envelopes = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [[String: Any]])
        } else {
            envelopes = try body.split(separator: UInt8(ascii: "\n")).map { try #require(try JSONSerialization.jsonObject(with: Data($0)) as? [String: Any]) }
        }
        #expect(envelopes.count == payloads.count)
        for (envelope, payload) in zip(envelopes, payloads) {
            if String(validating: payload, as: UTF8.self) == nil {
                #expect(envelope["data"] == nil)
                let base64 = try #require(envelope["data_base64"] as? String)
                #expect(Data(base64Encoded: base64).map(Array.init) == payload)
            } else {
                #expect(envelope["data_base64"] == nil)
                #expect((envelope["data"] as? String).map { Array($0.utf8) } == payload)
            }
        }
        let replacement: [UInt8] = [0xEF, 0xBF, 0xBD]
        let held = payloads.filter { String(validating: $0, as: UTF8.self) != nil }.map { occurrences(of: replacement, in: $0) }.reduce(0, +)
        #expect(held == 1)
        #expect(occurrences(of: replacement, in: body) == held)
    }

    /// In `raw`, `{"data_base64":…}` stands for bytes; a record that is itself an object with
    /// that member, however its key is spelled, is wrapped too, so it cannot be misread.
    @Test func rawWrapsRecordsThatWouldReadAsBase64Elements() throws {
        let payloads = [#"{"data_base64":"AAAA"}"#, #" { "x" : 1, "data\u005fbase64" : 2 } "#, #"{"x":"\u0041","y":"data_base64"}"#, #"["data_base64"]"#]
            .map { Array($0.utf8) }
        let encoder = BatchEncoder(logID: Self.log, encoding: .raw)
        let (body, _) = encoder.encode(Self.records(payloads), maxBytes: .max)
        let elements = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [Any])
        let wrapped = elements.map { ($0 as? [String: Any])?.keys.sorted() == ["data_base64"] }
        #expect(wrapped == [true, true, false, false])
        let received = try BatchDecoder.decode(body, format: .raw, header: BatchHeader(logID: Self.log.description, seqs: 0...3))
        #expect(try received.map(Self.bytes) == payloads)
    }
}

private func occurrences(of needle: [UInt8], in haystack: [UInt8]) -> Int {
    guard haystack.count >= needle.count else { return 0 }
    return (0...(haystack.count - needle.count)).count { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
}
