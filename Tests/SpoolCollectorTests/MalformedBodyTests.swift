import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import SpoolCollector

/// Bad requests are answered 4xx with a JSON error and record nothing.
@Suite struct MalformedBodyTests {
    /// Sends one request to a fresh collector and checks it was refused with `status`.
    private func expectRefused(
        _ body: [UInt8], headers: [String: String], status: Int,
        configure: (inout CollectorConfiguration) -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let server = try await TestServer.start(configure)
        let answer = try await server.post(body, headers: headers)
        await server.collector.stop()
        #expect(answer.status == status, sourceLocation: sourceLocation)
        let error = (try? JSONSerialization.jsonObject(with: Data(answer.body.utf8))) as? [String: String]
        #expect(error?["error"]?.isEmpty == false, "answer body: \(answer.body)", sourceLocation: sourceLocation)
        #expect(server.collector.records().isEmpty, sourceLocation: sourceLocation)
        #expect(server.collector.stats.received == 0, sourceLocation: sourceLocation)
        #expect(server.collector.stats.rejectedBatches == 1, sourceLocation: sourceLocation)
    }

    private func headers(_ format: TestFormat, batch: String = "\(testLog):0-2") -> [String: String] {
        format.headers.merging(["Spool-Batch": batch]) { $1 }
    }

    @Test(arguments: TestFormat.allCases)
    func garbageIsRefused(format: TestFormat) async throws {
        try await expectRefused(Array("this is not json {[".utf8), headers: headers(format), status: 400)
    }

    @Test func nonArrayJSONIsRefused() async throws {
        try await expectRefused(Array(#"{"id":"x","seq":0}"#.utf8), headers: headers(.json), status: 400)
        try await expectRefused(Array("42".utf8), headers: headers(.raw), status: 400)
    }

    @Test func truncatedArrayIsRefused() async throws {
        let full = body(.json, seqs: 0...2)
        try await expectRefused(Array(full.dropLast()), headers: headers(.json), status: 400)
    }

    @Test(arguments: TestFormat.allCases)
    func moreRecordsThanTheHeaderRangeAreRefused(format: TestFormat) async throws {
        try await expectRefused(body(format, seqs: 0...3), headers: headers(format, batch: "\(testLog):0-2"), status: 400)
    }

    @Test(arguments: TestFormat.allCases)
    func fewerRecordsThanTheHeaderRangeEndsAtAreRefused(format: TestFormat) async throws {
        try await expectRefused(body(format, seqs: 0...1), headers: headers(format, batch: "\(testLog):0-2"), status: 400)
    }

    @Test func missingSpoolBatchIsRefused() async throws {
        try await expectRefused(body(.json, seqs: 0...2), headers: TestFormat.json.headers, status: 400)
    }

    @Test(arguments: ["garbage", "\(testLog):2-1", "\(testLog.uppercased()):0-2", "abc:0-2", "\(testLog):0", "\(testLog):-1-2", "\(testLog):00-2"])
    func invalidSpoolBatchIsRefused(header: String) async throws {
        try await expectRefused(body(.json, seqs: 0...2), headers: headers(.json, batch: header), status: 400)
    }

    @Test func envelopeIdsMustMatchTheHeaderLogAndSeq() async throws {
        let wrongLog = body(.json, log: otherLog, seqs: 0...2)
        try await expectRefused(wrongLog, headers: headers(.json), status: 400)
        let wrongSeq = Array(#"[{"id":"\#(testLog)-7","seq":0,"time":1,"data":1}]"#.utf8)
        try await expectRefused(wrongSeq, headers: headers(.json, batch: "\(testLog):0-0"), status: 400)
        let missingData = Array(#"[{"id":"\#(testLog)-0","seq":0,"time":1}]"#.utf8)
        try await expectRefused(missingData, headers: headers(.json, batch: "\(testLog):0-0"), status: 400)
        let fractionalSeq = Array(#"[{"id":"\#(testLog)-0","seq":0.0,"time":1,"data":1}]"#.utf8)
        try await expectRefused(fractionalSeq, headers: headers(.json, batch: "\(testLog):0-0"), status: 400)
    }

    @Test func seqsOutOfOrderAreRefused() async throws {
        try await expectRefused(body(.json, [(0, "1"), (2, "2"), (1, "3"), (2, "4")]), headers: headers(.json), status: 400)
    }

    @Test func invalidUTF8IsRefused() async throws {
        let bytes = Array(#"[""#.utf8) + [0xC3, 0x28] + Array(#""]"#.utf8)
        try await expectRefused(bytes, headers: headers(.raw, batch: "\(testLog):0-0"), status: 400)
    }

    @Test func corruptCompressedBodiesAreRefused() async throws {
        let plain = body(.json, seqs: 0...2)
        var gzipped = gzip(plain)
        gzipped[gzipped.count / 2] ^= 0xFF
        try await expectRefused(gzipped, headers: headers(.json).merging(["Content-Encoding": "gzip"]) { $1 }, status: 400)
        try await expectRefused(Array(zstd(plain).dropLast(3)), headers: headers(.json).merging(["Content-Encoding": "zstd"]) { $1 }, status: 400)
        try await expectRefused(plain, headers: headers(.json).merging(["Content-Encoding": "zstd"]) { $1 }, status: 400)
    }

    @Test func unsupportedMediaTypesAreRefused() async throws {
        let plain = body(.json, seqs: 0...2)
        try await expectRefused(plain, headers: headers(.json).merging(["Content-Type": "text/plain"]) { $1 }, status: 415)
        try await expectRefused(plain, headers: headers(.json).merging(["Content-Encoding": "br"]) { $1 }, status: 415)
    }

    @Test func bodyAboveMaxBodyBytesIsRefused() async throws {
        let plain = body(.json, seqs: 0...2)
        try await expectRefused(plain, headers: headers(.json), status: 413) { $0.maxBodyBytes = plain.count - 1 }
    }

    @Test func bodyAtMaxBodyBytesIsAccepted() async throws {
        let plain = body(.json, seqs: 0...2)
        let server = try await TestServer.start { $0.maxBodyBytes = plain.count }
        let answer = try await server.post(plain, headers: headers(.json))
        await server.collector.stop()
        #expect(answer.status == 200)
    }

    @Test(arguments: ["gzip", "zstd"])
    func compressionBombPastMaxDecodedBytesIsRefused(coding: String) async throws {
        // 64 MiB of spaces compress to a few kilobytes; the limit is 1 MiB.
        let bomb = [UInt8](repeating: UInt8(ascii: " "), count: 64 << 20)
        let compressed = coding == "gzip" ? gzip(bomb) : zstd(bomb)
        #expect(compressed.count < 128 << 10)
        try await expectRefused(
            compressed, headers: headers(.json).merging(["Content-Encoding": coding]) { $1 }, status: 413
        ) { $0.maxDecodedBytes = 1 << 20 }
    }

    @Test func deeplyNestedJSONIsRefusedWithoutCrashing() async throws {
        let depth = 100_000
        let nested = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        try await expectRefused(Array("[\(nested)]".utf8), headers: headers(.raw, batch: "\(testLog):0-0"), status: 400)
    }

    @Test func refusedBatchCountsTheRecordsItsHeaderNamed() async throws {
        let server = try await TestServer.start()
        _ = try await server.post(Array("nope".utf8), headers: headers(.json, batch: "\(testLog):10-19"))
        await server.collector.stop()
        #expect(server.collector.stats.rejectedBatches == 1)
        #expect(server.collector.stats.rejectedRecords == 10)
    }

    @Test func onlyPostIsAccepted() async throws {
        let server = try await TestServer.start()
        let answer = try await server.send(.GET)
        await server.collector.stop()
        #expect(answer.status == 405)
    }
}
