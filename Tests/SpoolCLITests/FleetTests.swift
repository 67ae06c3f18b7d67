import Foundation
import SpoolServers
import Spool
import Testing

/// Issue #28's fleet (``Fleet``) into each kind of destination: a final collector (`--out`, the
/// stand-in for a shared engine), one PostgreSQL table, one Pub/Sub topic. One at a time: each
/// runs a dozen processes on a 2-core machine.
@Suite(.serialized) struct FleetTests {
    /// Every device record is in the final collector's file under its device id, each once
    /// after its de-duplication by id.
    @Test(.timeLimit(.minutes(5)))
    func fourDevicesThroughNginxToThreeCollectorsKilledAtRandomLoseNothing() throws {
        let scratch = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let out = scratch + "/final.ndjson"
        let final = try CollectorChild(["--out", out], stderrPath: scratch + "/final.err")
        defer { final.kill() }
        var lines: [(id: String, object: [String: Any])] = []
        let stored = try Fleet.run(destination: ["--url", final.url, "--encoding", "ndjson"]) { devices in
            lines = try Fleet.waitFor(devices.expected, ids: { Set($0.map(\.id)) }) { try collectedLines(out) }
            let received = Set(lines.map(\.id))
            let missing = devices.expected.subtracting(received)
            #expect(missing.isEmpty, "\(missing.count) of \(devices.expected.count) device records never reached the final collector after \(devices.kills) kills")
            #expect(received == devices.expected, "an id that is not a device record's arrived")
            #expect(lines.count == devices.expected.count, "the final collector recorded a device record twice")
            #expect(!lines.contains { $0.id.hasPrefix(devices.intruder.description) })
        }
        // What the chaos did, for the CI log: copies above the record count are retries that
        // reached a second collector (or the same one after a restart).
        print("fleet → collector: \(lines.count) records in the final file; \(stored) in the collectors' logs")
    }

    /// Every device record is in one PostgreSQL table (of a real PostgreSQL 15 the test process
    /// starts) exactly once: `count(*)` is the number of records the devices appended, and the
    /// ids are exactly theirs. The three forwarders share the table and each creates it if it
    /// is missing (`--create-table`), all at once at the first batch.
    @Test(.timeLimit(.minutes(5)))
    func fourDevicesThroughNginxToThreeCollectorsIntoOnePostgresTableExactlyOnce() throws {
        // Its own: in one `swift test` process with the PostgreSQL suites, they crash the shared one.
        let cluster = try PostgresCluster.own()
        let database = try cluster.createDatabase()
        func ids() throws -> Set<String> {
            Set(try cluster.psql("SELECT id FROM events", database: database).split(separator: "\n").map(String.init))
        }
        var rows = 0
        let destination = ["--postgres", cluster.url(database: database), "--table", "events", "--create-table"]
        let stored = try Fleet.run(destination: destination) { devices in
            let received = try Fleet.waitFor(devices.expected, ids: { $0 }) {
                try cluster.psql("SELECT to_regclass('events') IS NULL", database: database) == "t" ? [] : try ids()
            }
            let missing = devices.expected.subtracting(received)
            #expect(missing.isEmpty, "\(missing.count) of \(devices.expected.count) device records never reached PostgreSQL after \(devices.kills) kills")
            #expect(received == devices.expected, "a row whose id is not a device record's")
            rows = Int(try cluster.psql("SELECT count(*) FROM events", database: database)) ?? -1
            #expect(rows == devices.expected.count, "count(*) is \(rows), the devices appended \(devices.expected.count)")
            #expect(try cluster.psql("SELECT count(DISTINCT id) FROM events", database: database) == "\(devices.expected.count)")
            // Each row under its device's log id and seq, with the record as JSON.
            #expect(try cluster.psql("""
                SELECT count(*) FROM events WHERE id <> log_id || '-' || seq OR data IS NULL OR data->>'n' IS NULL
                """, database: database) == "0")
            #expect(try cluster.psql("SELECT count(*) FROM events WHERE log_id = '\(devices.intruder)'", database: database) == "0")
        }
        print("fleet → PostgreSQL: \(rows) rows; \(stored) records in the collectors' logs")
    }

    /// Every device record is in one Pub/Sub topic (the emulator, started as the Pub/Sub tests
    /// start it) at least once: pulled by a subscription made before the first publish, the
    /// messages' `id` attributes cover every device record's id and hold no other.
    @Test(.timeLimit(.minutes(5)))
    func fourDevicesThroughNginxToThreeCollectorsIntoOnePubSubTopicAtLeastOnce() async throws {
        let emulator = try await PubSubEmulator.shared()
        let (topic, subscription) = try await emulator.createTopic(named: "fleet")
        var pulled: [String] = []
        let stored = try Fleet.run(destination: ["--pubsub-topic", topic],
                                 environment: ["PUBSUB_EMULATOR_HOST": "127.0.0.1:\(emulator.port)"]) { devices in
            let ids = try Fleet.waitFor(devices.expected, ids: { $0 }) {
                // Pulled messages are acknowledged: each pull adds what arrived since the last.
                pulled += try emulator.pullAllBlocking(subscription).map { $0.attributes?["id"] ?? "" }
                return Set(pulled)
            }
            let missing = devices.expected.subtracting(ids)
            #expect(missing.isEmpty, "\(missing.count) of \(devices.expected.count) device records never reached the topic after \(devices.kills) kills")
            #expect(ids == devices.expected, "a message whose id is not a device record's (or none)")
        }
        print("fleet → Pub/Sub: \(pulled.count) messages for \(Set(pulled).count) ids; \(stored) records in the collectors' logs")
    }
}
