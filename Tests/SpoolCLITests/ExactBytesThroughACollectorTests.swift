import Foundation
import Spool
import SpoolServers
import Testing

/// Records keep their exact bytes from a device, through `spool collector --log`, to
/// PostgreSQL and Pub/Sub (issue #33): the text `plain text 1` and the JSON string
/// `"plain text 2"` (quotes included) travelled alike in the envelope, so the collector stored
/// both with quotes and the forwarded row held the jsonb string `"plain text 1"` with
/// `data_bytes` NULL. All real processes: `spool append`, `spool collector`, `spool sync`.
@Suite struct ExactBytesThroughACollectorTests {
    /// What the device appends, one per line: text that is not JSON, a JSON string, a JSON
    /// object, text with JSON's special characters, and bytes that are not UTF-8.
    static let records: [[UInt8]] = [
        Array("plain text 1".utf8),
        Array(#""plain text 2""#.utf8),
        Array(#"{"a":1}"#.utf8),
        Array("say \"hi\" \\ tab\tend".utf8),
        [0xFF, 0xFE, 0x00, 0x41],
    ]

    /// A collector's log holding the device's records, the device's log id, and where it is.
    static func collectedLog(_ directory: String) throws -> (log: String, device: LogID) {
        let device = directory + "/device", collected = directory + "/collected"
        let input = records.reduce(into: Data()) { $0.append(contentsOf: $1 + [0x0A]) }
        let append = try SpoolBinary.run(["append", device, "--durability", "synced"], input: input)
        #expect(append.status == 0, "\(append.stderr)")
        let collector = try CollectorChild(["--log", collected], stderrPath: directory + "/collector.err")
        let sync = try SpoolBinary.run(["sync", device, "--url", collector.url, "--once", "--create", "--retries", "20"])
        collector.stop()
        #expect(sync.status == 0, "\(sync.stderr)")
        let log = try EventLog.open(directory: device)
        defer { try? log.close() }
        // The collector stored the device's exact bytes, not a JSON rendering of them.
        #expect(try dumpOrigins(collected).map(\.payload) == records)
        return (collected, log.id)
    }

    @Test(.timeLimit(.minutes(5)))
    func textAndJSONStringsReachPostgreSQLByteForByte() throws {
        let cluster = try PostgresCluster.own()
        let database = try cluster.createDatabase()
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (collected, device) = try Self.collectedLog(directory)
        let forward = try SpoolBinary.run(["sync", collected, "--postgres", cluster.url(database: database), "--table", "events",
                                           "--create-table", "--once", "--create", "--retries", "20"])
        #expect(forward.status == 0, "\(forward.stderr)")
        let rows = try cluster.psql("""
            SELECT id, coalesce(data::text, 'NULL'), coalesce(encode(data_bytes, 'hex'), 'NULL') FROM events ORDER BY seq
            """, database: database).split(separator: "\n").map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(rows.map { $0.first ?? "" } == (0..<Self.records.count).map { device.eventID(seq: UInt64($0)) })
        #expect(rows.count == 5)
        guard rows.count == 5 else { return }
        #expect(rows[0].dropFirst().map { $0 } == ["NULL", hex(Self.records[0])], "text that is not JSON: its bytes in data_bytes")
        #expect(rows[1].dropFirst().map { $0 } == [#""plain text 2""#, "NULL"], "a JSON string: jsonb, quotes and all")
        #expect(rows[2].dropFirst().map { $0 } == [#"{"a": 1}"#, "NULL"])
        #expect(rows[3].dropFirst().map { $0 } == ["NULL", hex(Self.records[3])])
        #expect(rows[4].dropFirst().map { $0 } == ["NULL", hex(Self.records[4])])
    }

    @Test(.timeLimit(.minutes(5)))
    func textAndJSONStringsReachPubSubByteForByte() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = try await emulator.createTopic(named: "exact")
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (collected, device) = try Self.collectedLog(directory)
        let forward = try SpoolBinary.run(["sync", collected, "--pubsub-topic", topic, "--once", "--create", "--retries", "20"],
                                          environment: ["PUBSUB_EMULATOR_HOST": "127.0.0.1:\(emulator.port)"])
        #expect(forward.status == 0, "\(forward.stderr)")
        var messages: [String: [UInt8]] = [:]
        for _ in 0..<100 where messages.count < Self.records.count {
            for message in try await emulator.pullAll(subscription) { messages[message.attributes?["id"] ?? ""] = message.bytes }
        }
        for (seq, record) in Self.records.enumerated() {
            #expect(messages[device.eventID(seq: UInt64(seq))] == record, "seq \(seq)")
        }
    }
}
