import Foundation
import Testing
@testable import SpoolCollector

/// Every body layout and every content coding of the wire format is accepted and recorded.
@Suite struct EncodingTests {
    @Test(arguments: TestFormat.allCases, ["none", "gzip", "zstd"])
    func batchIsRecordedInOrder(format: TestFormat, coding: String) async throws {
        let server = try await TestServer.start()
        let plain = body(format, seqs: 0...9)
        let sent: [UInt8] = switch coding {
        case "gzip": gzip(plain)
        case "zstd": zstd(plain)
        default: plain
        }
        let answer = try await server.post(batch: sent, seqs: 0...9, format: format, coding: coding == "none" ? nil : coding)
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(answer.body == #"{"accepted":10,"duplicates":0,"conflicts":0}"#)
        let records = server.collector.records()
        #expect(records.map(\.seq) == Array(0...9))
        #expect(records.allSatisfy { $0.logID == testLog })
        #expect(records.map(\.data) == (0...9).map(sampleData))
        #expect(records.map(\.id) == (0...9).map { "\(testLog)-\($0)" })
        #expect(records.map(\.time) == (0...9).map { format == .raw ? nil : sampleTime($0) })
        let stats = server.collector.stats
        #expect(stats.received == 10)
        #expect(stats.acceptedBatches == 1)
        #expect(stats.bodyBytes == sent.count)
        #expect(stats.decodedBytes == plain.count)
    }

    @Test func outputFileHoldsExactlyTheUniqueRecordsWithOwnerOnlyMode() async throws {
        let directory = try temporaryDirectory()
        let path = directory.appendingPathComponent("received.ndjson").path
        let server = try await TestServer.start { $0.outputPath = path }
        #expect(try await server.post(batch: body(.json, seqs: 0...4), seqs: 0...4, format: .json).status == 200)
        #expect(try await server.post(batch: body(.ndjson, seqs: 3...7), seqs: 3...7, format: .ndjson).status == 200)
        #expect(try await server.post(batch: body(.raw, log: otherLog, seqs: 0...1), log: otherLog, seqs: 0...1, format: .raw).status == 200)
        await server.collector.stop()

        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let expected = (UInt64(0)...7).map { #"{"id":"\#(testLog)-\#($0)","seq":\#($0),"time":\#(sampleTime($0)),"data":\#(sampleData($0))}"# }
            + (UInt64(0)...1).map { #"{"id":"\#(otherLog)-\#($0)","seq":\#($0),"data":\#(sampleData($0))}"# }
            + [""]
        #expect(lines.map(String.init) == expected)
        for line in lines.dropLast() {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: Any])
        }
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try FileManager.default.removeItem(at: directory)
    }

    @Test func prettyPrintedDataIsCompactedToOneLineAndStringsAreKept() async throws {
        let directory = try temporaryDirectory()
        let path = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start { $0.outputPath = path }
        let data = "{\n  \"a\" : [ 1 ,\t2 ],\r\n  \"s\" : \"keep  this \\n \\\" spacing\"\n}"
        let sent = Array("[\n  \(data)\n]\n".utf8)
        let answer = try await server.post(batch: sent, seqs: 5...5, format: .raw)
        await server.collector.stop()

        #expect(answer.status == 200)
        let compact = #"{"a":[1,2],"s":"keep  this \n \" spacing"}"#
        #expect(server.collector.records().map(\.data) == [compact])
        #expect(try String(contentsOfFile: path, encoding: .utf8) == #"{"id":"\#(testLog)-5","seq":5,"data":\#(compact)}"# + "\n")
        try FileManager.default.removeItem(at: directory)
    }

    @Test func recordsOfAnyJSONTypeAreAccepted() async throws {
        let server = try await TestServer.start()
        let values = [#""a plain string""#, "42", "-1.5e3", "true", "null", "[]", "{}", #"{"nested":{"deep":[[{"x":null}]]}}"#]
        let records = values.enumerated().map { (seq: UInt64($0.offset), data: $0.element) }
        let last = UInt64(values.count - 1)
        let answer = try await server.post(batch: body(.json, records), seqs: 0...last, format: .json)
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(server.collector.records().map(\.data) == values)
    }

    @Test func envelopeBatchMaySkipSeqsItsLogExpired() async throws {
        let server = try await TestServer.start()
        let answer = try await server.post(batch: body(.json, [(3, "1"), (4, "2"), (9, "3")]), seqs: 3...9, format: .json)
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(server.collector.records().map(\.seq) == [3, 4, 9])
    }

    @Test func anyPathAndContentTypeParametersAreAccepted() async throws {
        let server = try await TestServer.start()
        let answer = try await server.post(
            body(.json, seqs: 0...0),
            headers: ["Content-Type": "application/json; charset=utf-8", "Spool-Batch": "\(testLog):0-0"],
            path: "/v1/events"
        )
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "application/json")
        #expect(server.collector.stats.received == 1)
    }

    @Test func concatenatedGzipMembersAreOneBody() async throws {
        let server = try await TestServer.start()
        let plain = body(.ndjson, seqs: 0...5)
        let sent = gzip(Array(plain[0..<40])) + gzip(Array(plain[40...]))
        let answer = try await server.post(batch: sent, seqs: 0...5, format: .ndjson, coding: "gzip")
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(server.collector.records().map(\.seq) == Array(0...5))
    }
}
