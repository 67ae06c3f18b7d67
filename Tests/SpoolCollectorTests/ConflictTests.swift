import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// A repeat is a duplicate only when it is the same bytes (issue #53, item 2): the same id
/// with other bytes is a conflict, stored under an id of its own, counted and never dropped.
@Suite struct ConflictTests {
    @Test func aRepeatWithOtherBytesIsAConflictWithAnIDOfItsOwn() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spool-conflicts-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("out.ndjson").path
        let server = try await TestServer.start { $0.outputPath = out }
        func post(_ tag: String) async throws -> String {
            try await server.post(batch: body(.json, (0...2).map { ($0, #"{"phone":"\#(tag)","n":\#($0)}"#) }), seqs: 0...2, format: .json).body
        }
        #expect(try await post("a") == #"{"accepted":3,"duplicates":0,"conflicts":0}"#)
        #expect(try await post("b") == #"{"accepted":3,"duplicates":0,"conflicts":3}"#)
        #expect(try await post("b") == #"{"accepted":0,"duplicates":3,"conflicts":0}"#, "a conflict sent again is a duplicate")
        #expect(try await post("a") == #"{"accepted":0,"duplicates":3,"conflicts":0}"#)
        await server.collector.stop()

        let records = server.collector.records()
        #expect(records.count == 6)
        #expect(records.map(\.conflict) == [false, false, false, true, true, true])
        #expect(Set(records.map(\.id)).count == 6)
        #expect(records[3].id == "\(testLog)-0~" + String(format: "%016llx", OriginRecord.digest(of: Array(#"{"phone":"b","n":0}"#.utf8))))
        #expect(server.collector.stats.conflicts == 3 && server.collector.stats.duplicates == 6 && server.collector.stats.received == 6)
        let ids = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["id"] as? String
        }
        #expect(ids == records.map(\.id))
    }

    /// A conflict a collector upstream stored arrives with its id (`origin_id` ending with
    /// `~<digest>`): it stays a conflict under that id, and a digest that is not its bytes' is
    /// refused.
    @Test func aForwardedConflictKeepsItsIDAndAFalseDigestIsRefused() async throws {
        let server = try await TestServer.start()
        let payload = Array(#"{"a":1}"#.utf8)
        let conflictID = OriginRecord.eventID(log: LogID(hex: testLog)!, seq: 7, payload: payload, conflict: true)
        func post(_ originID: String, seq: UInt64 = 0) async throws -> Answer {
            let envelope = #"{"id":"\#(otherLog)-\#(seq)","seq":\#(seq),"time":5,"origin_id":"\#(originID)","origin_seq":7,"data":{"a":1}}"#
            return try await server.post(batch: Array("[\(envelope)]".utf8), log: otherLog, seqs: seq...seq, format: .json)
        }
        #expect(try await post(conflictID).body == #"{"accepted":1,"duplicates":0,"conflicts":1}"#)
        #expect(try await post(conflictID, seq: 1).body == #"{"accepted":0,"duplicates":1,"conflicts":0}"#)
        let wrongDigest = "\(testLog)-7~0000000000000000"
        #expect(try await post(wrongDigest, seq: 2).status == 400)
        #expect(try await post(conflictID.uppercased(), seq: 2).status == 400)
        #expect(try await post("\(testLog)-7~abc", seq: 2).status == 400)
        #expect(try await post("\(testLog)-7~", seq: 2).status == 400)
        // The plain record arriving after its conflict keeps the plain id.
        #expect(try await post("\(testLog)-7", seq: 2).body == #"{"accepted":1,"duplicates":0,"conflicts":0}"#)
        await server.collector.stop()
        #expect(server.collector.records().map(\.id) == [conflictID, "\(testLog)-7"])
    }

    /// The digests of a log's latest ``StoredDigests/capacity`` seqs are kept: an older repeat
    /// cannot be compared, so it is stored, as a conflict, never dropped.
    @Test func aRepeatOlderThanTheDigestsKeptIsStoredAsAConflict() async throws {
        let server = try await TestServer.start()
        let last = UInt64(StoredDigests.capacity)
        #expect(try await server.post(batch: body(.json, seqs: 0...last), seqs: 0...last, format: .json).status == 200)
        let newest = try await server.post(batch: body(.json, seqs: last...last), seqs: last...last, format: .json)
        let oldest = try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        await server.collector.stop()
        #expect(newest.body == #"{"accepted":0,"duplicates":1,"conflicts":0}"#)
        #expect(oldest.body == #"{"accepted":1,"duplicates":0,"conflicts":1}"#)
    }
}
