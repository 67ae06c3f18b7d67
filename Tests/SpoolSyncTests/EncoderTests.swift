import CZlib
import CZstd
import Foundation
import Spool
import Testing
@testable import SpoolSync

extension SyncBatch {
    /// The HTTP request an ``HTTPSink`` prepared with the batch.
    var http: UploadRequest? { request?.body as? UploadRequest }
}

extension AnySink {
    /// The batch the worker would cut from `records` as read: unwrapped by the sink's
    /// unwrapper, then cut as a read's records are.
    func prepare(_ records: [Record], end: UInt64, start: UInt64, maxBytes: Int) -> SyncBatch {
        prepare(unwrapper.unwrap(records)[...], end: end, start: start, maxBytes: maxBytes)
    }
}

@Suite struct EncoderTests {
    static let log = LogID(bytes: Array(0..<16))
    static let id = "000102030405060708090a0b0c0d0e0f"

    /// The HTTP sink as the worker sees it, cutting batches as a drain does.
    func httpSink(_ configuration: SyncConfiguration) -> AnySink {
        AnySink(HTTPSink(uploader: ScriptedUploader(), logID: Self.log, configuration: configuration), logID: Self.log)
    }

    func record(_ seq: UInt64, _ payload: String, time: Int64 = 1_700_000_000_123) -> Record {
        Record(seq: seq, timestamp: time, payload: Array(payload.utf8))
    }

    /// `record` as the worker hands it to a sink of this log, which is not a collector's.
    func unwrapped(_ record: Record) -> OutgoingRecord {
        RecordUnwrapper(logID: Self.log, origins: false).unwrap(record)
    }

    /// What a consumer's read from offset 0 returned: `records`, ending at `end`.
    func readBatch(_ records: [Record], end: UInt64) -> ConsumerBatch {
        ConsumerBatch(records: records, endSeq: end, startSeq: 0)
    }

    func encode(_ records: [Record], _ encoding: HTTPSink.Encoding, maxBytes: Int = .max) -> String {
        let (body, count) = BatchEncoder(logID: Self.log, encoding: encoding).encode(records, maxBytes: maxBytes)
        #expect(count == records.count || maxBytes != .max)
        return String(decoding: body, as: UTF8.self)
    }

    /// The payload as the JSON value of `data`, or `nil` when it is not valid UTF-8.
    func data(_ payload: [UInt8]) -> String? {
        var body: [UInt8] = []
        guard BatchEncoder.appendData(payload, to: &body, oneLine: false) != nil else {
            #expect(body.isEmpty)
            return nil
        }
        return String(decoding: body, as: UTF8.self)
    }

    @Test func jsonIsAnArrayOfEnvelopesWithTheRecordEmbedded() {
        let body = encode([record(0, #"{"a":1}"#), record(41, "hello", time: 5)], .json)
        #expect(body == #"[{"id":"\#(Self.id)-0","seq":0,"time":1700000000123,"data":{"a":1}},{"id":"\#(Self.id)-41","seq":41,"time":5,"data":"hello","data_text":true}]"#)
        #expect((try? JSONSerialization.jsonObject(with: Data(body.utf8))) != nil)
    }

    /// The record `hello` and the record `"hello"` (a JSON string) travel differently: only
    /// text that is not JSON carries `data_text` (issue #33), in both envelope encodings.
    @Test(arguments: [HTTPSink.Encoding.json, .ndjson])
    func onlyTextThatIsNotJSONIsMarkedAsText(encoding: HTTPSink.Encoding) {
        let body = encode([record(0, "hello"), record(1, #""hello""#)], encoding)
        #expect(body.contains(#""seq":0,"time":1700000000123,"data":"hello","data_text":true}"#))
        #expect(body.contains(#""seq":1,"time":1700000000123,"data":"hello"}"#))
    }

    @Test func ndjsonIsOneEnvelopePerLine() {
        let body = encode([record(7, "[1, 2]"), record(8, "x")], .ndjson)
        #expect(body == "{\"id\":\"\(Self.id)-7\",\"seq\":7,\"time\":1700000000123,\"data\":[1, 2]}\n{\"id\":\"\(Self.id)-8\",\"seq\":8,\"time\":1700000000123,\"data\":\"x\",\"data_text\":true}\n")
    }

    @Test func ndjsonKeepsPrettyPrintedRecordsOnOneLine() {
        let body = encode([record(1, "{\n  \"a\": \"x\"\r\n}")], .ndjson)
        #expect(body == "{\"id\":\"\(Self.id)-1\",\"seq\":1,\"time\":1700000000123,\"data\":{   \"a\": \"x\"  }}\n")
        // JSON keeps the record's bytes exactly.
        #expect(encode([record(1, "{\n}")], .json).contains("\"data\":{\n}}"))
    }

    /// Text that is not JSON is a base64 element: raw has no room for `data_text`, and the
    /// element `"plain"` would read as the record `"plain"`, quotes included.
    @Test func rawIsAnArrayOfTheRecords() {
        #expect(encode([record(0, #"{"a":1}"#), record(1, "plain"), record(2, "3.5e2"), record(3, #""plain""#)], .raw)
                == #"[{"a":1},{"data_base64":"cGxhaW4="},3.5e2,"plain"]"#)
    }

    @Test func emptyBatchIsAnEmptyArray() {
        #expect(encode([], .json) == "[]")
        #expect(encode([], .ndjson) == "")
    }

    @Test func negativeTimestampsAndBigSeqs() {
        let body = encode([record(UInt64.max, "1", time: -42)], .json)
        #expect(body == #"[{"id":"\#(Self.id)-18446744073709551615","seq":18446744073709551615,"time":-42,"data":1}]"#)
    }

    @Test(arguments: [
        "{}", "[]", "0", "-0", "1.25", "-1e+9", "2E-3", "true", "false", "null", "\"\"", " {\"a\" : [1, {\"b\": null}] } ",
        "\"\\u00e9\\n\\\"\"", "\"é ☃ 😀\"", "[[[[[]]]]]",
    ])
    func validJSONIsEmbeddedAsItIs(text: String) {
        #expect(data(Array(text.utf8)) == text)
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "{\"a\"}", "{\"a\":1,}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nulls", "NaN",
        "\"unterminated", "\"bad \\x escape\"", "\"\\u12G4\"", "'single'", "{a:1}", "[1] [2]", "\"tab\there\"",
    ])
    func invalidJSONIsEmbeddedAsAString(text: String) throws {
        let embedded = try #require(data(Array(text.utf8)))
        let decoded = try JSONSerialization.jsonObject(with: Data(embedded.utf8), options: .fragmentsAllowed)
        #expect(decoded as? String == text)
    }

    /// The validator skips plain string bytes eight at a time: whatever needs a look must be
    /// found at every position in and across those groups of eight, and at the string's end.
    @Test func stringBytesNeedingALookAreFoundAtEveryPosition() {
        let cases: [(bytes: [UInt8], valid: Bool)] = [
            (Array(#"\n"#.utf8), true), (Array(#"\u00e9"#.utf8), true), (Array("é".utf8), true), ([0x7F], true),
            ([0x01], false), ([0x1F], false), ([0x0A], false), ([0xFF], false), ([0xC3], false), ([0xED, 0xA0, 0x80], false),
            (Array(#"\x"#.utf8), false), ([0x22], false),
        ]
        for (special, valid) in cases {
            for before in 0..<20 {
                for after in [0, 1, 7, 8, 9] {
                    let text = [0x22] + Array(repeating: UInt8(ascii: "a"), count: before) + special
                        + Array(repeating: UInt8(ascii: "b"), count: after) + [0x22]
                    let isValid = text.withUnsafeBufferPointer { JSONValidator.isValid($0) }
                    #expect(isValid == valid, "\(special) after \(before) bytes, \(after) before the end")
                }
            }
            // Unterminated (the quote case closes the string): the scan stops at the end.
            let open = [0x22] + Array(repeating: UInt8(ascii: "a"), count: 16) + special
            #expect(open.withUnsafeBufferPointer { JSONValidator.isValid($0) } == (special == [0x22]))
        }
    }

    @Test func stringsEscapeQuotesBackslashesAndControlCharacters() {
        let payload: [UInt8] = Array("a\"b\\c/".utf8) + [0x08, 0x0C, 0x0A, 0x0D, 0x09, 0x00, 0x1F, 0x7F]
        #expect(data(payload) == #""a\"b\\c/\b\f\n\r\t\u0000\u001f"# + "\u{7F}\"")
    }

    /// No JSON value holds these bytes: they are refused, never replaced with U+FFFD, and the
    /// record travels as `data_base64` (BinaryPayloadTests).
    @Test(arguments: [
        [0x80], [0x61, 0x80, 0x62], [0xE2, 0x82], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF],
        Array("{\"a\":\"".utf8) + [0xFF] + Array("\"}".utf8),
    ] as [[UInt8]])
    func invalidUTF8HasNoJSONValue(payload: [UInt8]) {
        #expect(data(payload) == nil)
    }

    @Test func deepNestingIsAStringNotAStackOverflow() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(data(Array(deep.utf8))?.hasPrefix("\"[[[") == true)
        let fine = String(repeating: "[", count: JSONValidator.maxDepth) + String(repeating: "]", count: JSONValidator.maxDepth)
        #expect(data(Array(fine.utf8)) == fine)
    }

    /// Arrays and slices are encoded in place, other collections through a copy: the same bytes.
    @Test func everyKindOfCollectionEncodesToTheSameBody() {
        let pad = String(repeating: "x", count: 40)
        let records = (0..<6).map { record(UInt64($0), $0 % 2 == 0 ? #"{"n":\#($0),"pad":"\#(pad)"}"# : "plain \($0) \(pad)") }
        for encoding in HTTPSink.Encoding.allCases {
            let encoder = BatchEncoder(logID: Self.log, encoding: encoding)
            for maxBytes in [Int.max, 200] {
                let whole = encoder.encode(records, maxBytes: maxBytes)
                let slice = encoder.encode(records[...], maxBytes: maxBytes)
                let lazy = encoder.encode(records.lazy.map { $0 }, maxBytes: maxBytes)
                if maxBytes == .max {
                    #expect(whole.count == records.count)
                } else {
                    #expect(whole.count >= 1 && whole.count < records.count && whole.body.count <= maxBytes)
                }
                #expect(slice.body == whole.body && slice.count == whole.count)
                #expect(lazy.body == whole.body && lazy.count == whole.count)
            }
            // A slice that does not start at index 0 encodes its own records.
            let tail = encoder.encode(records[2...], maxBytes: .max)
            #expect(tail.body == encoder.encode(Array(records[2...]), maxBytes: .max).body)
            #expect(tail.count == 4)
        }
    }

    @Test func bodiesStayWithinMaxBytes() {
        let records = (0..<10).map { record(UInt64($0), String(repeating: "a", count: 90)) }
        let encoder = BatchEncoder(logID: Self.log, encoding: .json)
        let one = encoder.encode(records.prefix(1), maxBytes: .max).body.count
        for maxBytes in [one, one + 1, 2 * one, 3 * one + 5, 1000] {
            let (body, count) = encoder.encode(records, maxBytes: maxBytes)
            #expect(body.count <= maxBytes)
            let more = encoder.encode(records.prefix(count + 1), maxBytes: .max).body.count
            #expect(more > maxBytes)  // the longest prefix that fits
            #expect((try? JSONSerialization.jsonObject(with: Data(body))) != nil)
        }
        for encoding in HTTPSink.Encoding.allCases {
            let (body, count) = BatchEncoder(logID: Self.log, encoding: encoding).encode(records, maxBytes: 500)
            #expect(body.count <= 500)
            #expect(count >= 1)
        }
    }

    @Test func aRecordLargerThanMaxBytesIsSentAlone() {
        let big = record(0, String(repeating: "b", count: 5000))
        let (body, count) = BatchEncoder(logID: Self.log, encoding: .json).encode([big, record(1, "1")], maxBytes: 1024)
        #expect(count == 1)
        #expect(body.count > 5000)
    }

    /// A read is cut in seq order by count and by encoded bytes, at most `batches` of them;
    /// only a batch that takes the read's last record carries the read's end.
    @Test func aReadIsCutInSeqOrderWithinEachLimit() {
        let builder = httpSink(SyncConfiguration())
        let records = (0..<10).map { record(UInt64($0), "\($0)") }
        let cut = builder.prepare(readBatch(records, end: 12), from: 0, maxCount: 3, maxBytes: 1024, batches: 8)
        #expect(cut.map { $0.records.map(\.seq) } == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]])
        #expect(cut.map(\.end) == [3, 6, 9, 12])
        let short = builder.prepare(readBatch(records, end: 12), from: 0, maxCount: 3, maxBytes: 1024, batches: 2)
        #expect(short.map(\.end) == [3, 6])
        let big = (0..<4).map { record(UInt64($0), "\"" + String(repeating: "x", count: 600) + "\"") }
        let bytes = builder.prepare(readBatch(big, end: 4), from: 0, maxCount: 50, maxBytes: 1024, batches: 8)
        #expect(bytes.map { $0.records.count } == [1, 1, 1, 1])
        #expect(bytes.allSatisfy { ($0.http?.body.count ?? .max) <= 1024 })
        let nothing = builder.prepare(readBatch([], end: 7), from: 0, maxCount: 50, maxBytes: 1024, batches: 8)
        #expect(nothing.map(\.end) == [7] && nothing[0].records.isEmpty)
        // The window's records, read again from the committed offset, are dropped.
        let beyond = builder.prepare(readBatch(records, end: 12), from: 7, maxCount: 2, maxBytes: 1024, batches: 8)
        #expect(beyond.map { $0.records.map(\.seq) } == [[7, 8], [9]])
        #expect(beyond.map(\.end) == [9, 12])
        let caughtUp = builder.prepare(readBatch(records, end: 10), from: 10, maxCount: 2, maxBytes: 1024, batches: 8)
        #expect(caughtUp.map(\.end) == [10] && caughtUp[0].records.isEmpty)
    }

    @Test func requestsCarryTheBatchHeaderAndContentType() {
        var configuration = SyncConfiguration()
        configuration.http.headers = ["X-Api-Key": "k", "content-type": "text/plain"]
        let builder = httpSink(configuration)
        let batch = builder.prepare([record(3, "1"), record(4, "2")], end: 9, start: 3, maxBytes: 1024)
        #expect(batch.end == 9)
        #expect(batch.http?.headers == ["Content-Type": "application/json", "Spool-Batch": "\(Self.id):3-4", "X-Api-Key": "k"])
        #expect(batch.http?.timeout == .seconds(30))

        var http = configuration.http
        http.encoding = .raw
        http.compression = .gzip
        let raw = RequestBuilder(logID: Self.log, configuration: http, timeout: .seconds(30)).request(for: [unwrapped(record(5, "x"))])
        #expect(raw.headers["Spool-Encoding"] == "raw")
        #expect(raw.headers["Content-Encoding"] == "gzip")
        http.encoding = .ndjson
        #expect(RequestBuilder(logID: Self.log, configuration: http, timeout: .seconds(30)).request(for: [unwrapped(record(5, "x"))]).headers["Content-Type"] == "application/x-ndjson")
    }

    /// The HTTP sink's own configuration, given directly: its settings shape the request, and
    /// a bad one is refused by name when the sink is made.
    @Test func theSinksOwnConfigurationShapesRequestsAndIsValidated() throws {
        var http = HTTPSink.Configuration()
        http.encoding = .ndjson
        http.compression = .zstd
        http.headers = ["X-Api-Key": "k"]
        let sink = try HTTPSink(uploader: ScriptedUploader(), logID: Self.log, configuration: http, requestTimeout: .seconds(5))
        let request = sink.prepare(exactly: [unwrapped(record(5, "1"))]).body
        #expect(request.headers["Content-Type"] == "application/x-ndjson")
        #expect(request.headers["Content-Encoding"] == "zstd")
        #expect(request.headers["X-Api-Key"] == "k")
        #expect(request.timeout == .seconds(5))
        http.headers = ["bad name": "v"]
        do {
            _ = try HTTPSink(uploader: ScriptedUploader(), logID: Self.log, configuration: http)
            Issue.record("a bad header name was accepted")
        } catch {
            #expect(error.message.hasPrefix("HTTPSink.Configuration.headers"), "\(error)")
        }
        var old = SyncConfiguration()
        old.http.headers = ["bad name": "v"]
        #expect(throws: SyncError.self) { try old.validate() }
    }

    /// Raw bodies carry no ids, so a raw batch must be dense: a read with a skipped (expired,
    /// dropped, corrupt) range inside it is sent as two requests, each header naming exactly
    /// the seqs of its elements. Other encodings carry each record's id and keep the gap.
    @Test func aRawBatchEndsAtTheFirstGapInItsSeqs() {
        var configuration = SyncConfiguration()
        configuration.http.encoding = .raw
        let builder = httpSink(configuration)
        let records = [record(3, "1"), record(4, "2"), record(6, "3"), record(7, "4")]
        let first = builder.prepare(records, end: 9, start: 3, maxBytes: 1024)
        #expect(first.records.map(\.seq) == [3, 4])
        #expect(first.end == 5)
        #expect(first.http?.headers["Spool-Batch"] == "\(Self.id):3-4")
        #expect(first.http.map { String(decoding: $0.body, as: UTF8.self) } == "[1,2]")
        // What the next read returns: the skipped seq 5 is before its first record.
        let second = builder.prepare([record(6, "3"), record(7, "4")], end: 9, start: 5, maxBytes: 1024)
        #expect(second.records.map(\.seq) == [6, 7])
        #expect(second.end == 9)
        #expect(second.http?.headers["Spool-Batch"] == "\(Self.id):6-7")
        // One read cuts the same two requests, the gap committed with the second.
        let cut = builder.prepare(readBatch(records, end: 9), from: 0, maxCount: 50, maxBytes: 1024, batches: 8)
        #expect(cut.map { $0.records.map(\.seq) } == [[3, 4], [6, 7]])
        #expect(cut.map(\.end) == [5, 9])

        configuration.http.encoding = .json
        let json = httpSink(configuration).prepare(records, end: 9, start: 3, maxBytes: 1024)
        #expect(json.records.map(\.seq) == [3, 4, 6, 7])
        #expect(json.end == 9)
    }

    @Test func aBatchTrimmedToFitCommitsOnlyThroughItsLastRecord() {
        var configuration = SyncConfiguration()
        configuration.maxBatchBytes = 1024
        let records = (0..<10).map { record(UInt64($0), String(repeating: "c", count: 300)) }
        let batch = httpSink(configuration).prepare(records, end: 10, start: 0, maxBytes: configuration.maxBatchBytes)
        #expect(batch.records.count == 2)
        #expect(batch.end == 2)
        #expect(batch.http?.body.count ?? .max <= 1024)
    }
}

@Suite struct CompressionTests {
    let body = Array(String(repeating: #"{"event":"screen_view","n":12345},"#, count: 500).utf8)

    @Test func gzipRoundTripsThroughZlib() throws {
        let (compressed, encoding) = BodyCompressor(compression: .gzip, level: 6).compress(body)
        #expect(encoding == "gzip")
        #expect(compressed.count < body.count / 10)
        #expect(Array(compressed.prefix(2)) == [0x1F, 0x8B])  // the gzip magic
        #expect(try gunzip(compressed) == body)
    }

    @Test func zstdRoundTripsThroughLibzstd() {
        let (compressed, encoding) = BodyCompressor(compression: .zstd, level: 3).compress(body)
        #expect(encoding == "zstd")
        #expect(compressed.count < body.count / 10)
        var output = [UInt8](repeating: 0, count: body.count)
        let size = compressed.withUnsafeBytes { source in
            output.withUnsafeMutableBytes { ZSTD_decompress($0.baseAddress, $0.count, source.baseAddress, source.count) }
        }
        #expect(ZSTD_isError(size) == 0)
        #expect(Array(output.prefix(size)) == body)
    }

    @Test func emptyBodiesRoundTrip() throws {
        #expect(try gunzip(BodyCompressor(compression: .gzip).compress([]).body) == [])
        #expect(BodyCompressor(compression: .none).compress(body).contentEncoding == nil)
    }

    func gunzip(_ input: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        #expect(inflateInit2_(&stream, 16 + MAX_WBITS, zlibVersion(), Int32(MemoryLayout<z_stream>.size)) == Z_OK)
        defer { inflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: 1 << 20)
        let status = input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { destination in
                stream.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.avail_in = UInt32(source.count)
                stream.next_out = destination.baseAddress
                stream.avail_out = UInt32(destination.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        #expect(status == Z_STREAM_END)
        return Array(output.prefix(Int(stream.total_out)))
    }
}
