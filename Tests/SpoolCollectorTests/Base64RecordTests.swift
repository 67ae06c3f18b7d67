import Foundation
import Testing
@testable import SpoolCollector

/// Records sent as `data_base64` (bytes that are not valid UTF-8) are stored byte for byte,
/// in memory and in the `--out` file, and a malformed one is refused (issue #21, item 1).
@Suite struct Base64RecordTests {
    static let bytes: [[UInt8]] = [[0xFF, 0xFE, 0x00, 0x62], [0xED, 0xA0, 0x80], Array(0...255)]
    static let base64 = bytes.map { Data($0).base64EncodedString() }

    @Test(arguments: TestFormat.allCases)
    func base64RecordsAreStoredByteForByteAndWrittenAsBase64(format: TestFormat) async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start { $0.outputPath = path }
        let sent: String
        switch format {
        case .raw:
            sent = "[" + Self.base64.map { #" { "data_base64" : "\#($0)" }"# }.joined(separator: ",") + "]"
        case .json, .ndjson:
            let envelopes = Self.base64.enumerated().map {
                #"{"id":"\#(testLog)-\#($0.offset)","seq":\#($0.offset),"time":\#(sampleTime(UInt64($0.offset))),"data_base64":"\#($0.element)"}"#
            }
            sent = format == .json ? "[" + envelopes.joined(separator: ",") + "]" : envelopes.joined(separator: "\n")
        }
        let answer = try await server.post(batch: Array(sent.utf8), seqs: 0...2, format: format)
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(server.collector.records().map(\.binary) == Self.bytes)
        #expect(server.collector.records().allSatisfy { $0.data == nil })
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 3)
        for (line, base64) in zip(lines, Self.base64) {
            #expect(line.hasSuffix(#","data_base64":"\#(base64)"}"#))
            #expect(!line.contains(#""data":"#))
        }
    }

    @Test(arguments: [
        #""data":1,"data_base64":"AA==""#,   // both
        #""data_base64":"AA=""#,             // bad padding
        #""data_base64":"A A==""#,           // not base64
        #""data_base64":"\u0041A==""#,       // an escape: not plain base64 text
        #""data_base64":7"#,                 // not a string
        #""other":1"#,                       // neither
    ])
    func malformedEnvelopesAreRefused(members: String) async throws {
        let server = try await TestServer.start()
        let sent = #"[{"id":"\#(testLog)-0","seq":0,"time":1,\#(members)}]"#
        let answer = try await server.post(batch: Array(sent.utf8), seqs: 0...0, format: .json)
        await server.collector.stop()
        #expect(answer.status == 400)
        #expect(server.collector.records().isEmpty)
    }

    @Test(arguments: [#"{"data_base64":"AA==","x":1}"#, #"{"data_base64":"%%"}"#, #"{"data_base64":null}"#])
    func malformedRawBase64ElementsAreRefused(element: String) async throws {
        let server = try await TestServer.start()
        let answer = try await server.post(batch: Array("[\(element)]".utf8), seqs: 0...0, format: .raw)
        await server.collector.stop()
        #expect(answer.status == 400)
        #expect(server.collector.records().isEmpty)
    }
}
