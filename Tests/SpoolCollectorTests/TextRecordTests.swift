import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// `"data_text":true`: `data` is a JSON string whose value is the record's bytes, text that is
/// not JSON (issue #33: `hello` and `"hello"` travelled alike, and the collector stored the
/// first with quotes added). Without the member, as from older senders, `data` is the record's
/// JSON text, as it always was.
@Suite struct TextRecordTests {
    static let envelopes = [
        #"{"id":"\#(testLog)-0","seq":0,"time":5,"data":"plain text 1","data_text":true}"#,
        #"{"id":"\#(testLog)-1","seq":1,"time":5,"data":"plain text 2"}"#,
        #"{"id":"\#(testLog)-2","seq":2,"time":5,"data_text":false,"data":"plain text 3"}"#,
        #"{"id":"\#(testLog)-3","seq":3,"time":5,"data_text":true,"data":"q\"b\\s\/\b\f\n\r\t\u00e9\ud83d\ude00 \u0000"}"#,
        #"{"id":"\#(testLog)-4","seq":4,"time":5,"data":"","data_text":true}"#,
    ]
    static let payloads: [[UInt8]] = [
        Array("plain text 1".utf8),
        Array(#""plain text 2""#.utf8),
        Array(#""plain text 3""#.utf8),
        Array("q\"b\\s/\u{8}\u{c}\n\r\té😀 \u{0}".utf8),
        [],
    ]

    @Test func textIsStoredAsItsExactBytesAndJSONStringsWithTheirQuotes() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let logPath = directory.appendingPathComponent("log").path
        let outPath = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start {
            $0.logDirectory = logPath
            $0.outputPath = outPath
        }
        let batch = Array(("[" + Self.envelopes.joined(separator: ",") + "]").utf8)
        let answer = try await server.post(batch: batch, seqs: 0...4, format: .json)
        #expect(answer.status == 200, "\(answer.body)")
        #expect(server.collector.records().map(\.payload) == Self.payloads)
        await server.collector.stop()

        let stored = try withEventLog(directory: logPath) { log in
            try log.readAll().compactMap { item -> [UInt8]? in
                guard case .record(let record) = item else { return nil }
                return try OriginRecord.decode(record.payload).payload
            }
        }
        #expect(stored == Self.payloads)
        // The output file says which lines are text, so it keeps every record's bytes too.
        let lines = try String(contentsOfFile: outPath, encoding: .utf8).split(separator: "\n")
        for (line, payload) in zip(lines, Self.payloads) {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let data = try #require(object["data"] as? String)
            let bytes = object["data_text"] as? Bool == true ? Array(data.utf8) : Array("\"\(data)\"".utf8)
            #expect(bytes == payload, "\(line)")
        }
    }

    @Test(arguments: [
        #""data":"a","data_text":1"#,           // not a boolean
        #""data":"a","data_text":"true""#,      // a string, not true
        #""data":1,"data_text":true"#,          // data not a string
        #""data":{"a":"b"},"data_text":true"#,  // nor an object
        #""data_base64":"AA==","data_text":true"#,
        #""data_text":true"#,                   // no data
        #""data":"\ud800","data_text":true"#,   // a lone surrogate: no text has it
        #""data":"\udc00\ud800","data_text":true"#,
    ])
    func malformedTextIsRefused(members: String) async throws {
        let server = try await TestServer.start()
        let batch = Array(#"[{"id":"\#(testLog)-0","seq":0,"time":1,\#(members)}]"#.utf8)
        let answer = try await server.post(batch: batch, seqs: 0...0, format: .json)
        #expect(answer.status == 400, "\(answer.body)")
        #expect(server.collector.records().isEmpty)
        await server.collector.stop()
    }
}
