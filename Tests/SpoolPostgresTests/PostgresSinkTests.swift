import Foundation
import SpoolServers
import Spool
import SpoolSync
import Testing
@testable import SpoolPostgres

/// The sink against a real PostgreSQL 15 (``PostgresCluster``), driven directly: `prepare`
/// and `send` as the worker calls them.
extension PostgresSuites { @Suite struct PostgresSinkTests {
    @Test func everyRecordLandsOnceByteForByte() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let logID = LogID.random()
        let sink = try makeSink(cluster, database: database, table: "events", create: true, logID: logID)
        let records = sampleRecords(count: 500)
        var rest = records[...]
        while !rest.isEmpty {
            let request = sink.prepare(read: rest, maxBytes: 4096)
            #expect(request.count >= 1)
            #expect(await sink.send(request.body, timeout: .seconds(30)).isAccepted)
            // Sent again, as after a lost answer: nothing lands twice.
            #expect(await sink.send(request.body, timeout: .seconds(30)).isAccepted)
            rest = rest.dropFirst(request.count)
        }
        await sink.shutdown()
        try expectTable(cluster, database: database, table: "events", holds: records, logID: logID)
    }

    /// A collector's log holding two records of one id with different bytes (the second a
    /// conflict, FORMAT.md §11): each keeps a row of its own, sent twice or not.
    @Test func aConflictOfACollectorsLogKeepsARowOfItsOwn() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        var configuration = try PostgresSink.Configuration(url: cluster.url(database: database), table: "events")
        configuration.createTable = true
        let sink = try PostgresSink(configuration: configuration, logID: .random(), origins: true)
        let device = LogID.random()
        let first = OriginRecord(log: device, seq: 5, time: 1_700_000_000_000, payload: Array(#"{"phone":"a"}"#.utf8))
        let conflict = OriginRecord(log: device, seq: 5, time: 1_700_000_000_001, payload: Array(#"{"phone":"b"}"#.utf8), conflict: true)
        let stored = [first, conflict].enumerated().map { Record(seq: UInt64($0.offset), timestamp: 1, payload: $0.element.encoded()) }
        let request = sink.prepare(exactlyRead: stored)
        #expect(await sink.send(request.body, timeout: .seconds(30)).isAccepted)
        #expect(await sink.send(request.body, timeout: .seconds(30)).isAccepted)
        await sink.shutdown()
        let rows = try cluster.psql("SELECT id || ' ' || seq || ' ' || (data->>'phone') FROM events ORDER BY id", database: database)
        #expect(rows == "\(first.id) 5 a\n\(conflict.id) 5 b")
        #expect(conflict.id.hasPrefix(device.eventID(seq: 5) + "~"))
    }

    /// Sinks of several processes (a fleet's forwarders) that share a missing table and create
    /// it at their first batch, all at once: every one delivers (two plain `CREATE TABLE IF NOT
    /// EXISTS` at once fail one of them on a catalog index, SQLSTATE 23505, which is fatal).
    @Test func sinksCreatingOneTableAtOnceAllDeliver() async throws {
        let cluster = try PostgresCluster.shared()
        for _ in 0..<3 {
            let database = try cluster.createDatabase()
            let sinks = try (0..<8).map { _ in try makeSink(cluster, database: database, table: "events", create: true) }
            let requests = sinks.map { $0.prepare(read: sampleRecords(count: 10)[...], maxBytes: 1 << 20).body }
            let outcomes = await withTaskGroup(of: SinkOutcome.self) { group in
                for (sink, request) in zip(sinks, requests) { group.addTask { await sink.send(request, timeout: .seconds(30)) } }
                return await group.reduce(into: []) { $0.append($1) }
            }
            for sink in sinks { await sink.shutdown() }
            let refused = outcomes.filter { !$0.isAccepted }
            #expect(refused.isEmpty, "\(refused)")
            #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "80")
        }
    }

    @Test func aMissingTableStopsTheWorkerNamingIt() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let sink = try makeSink(cluster, database: database, table: "missing_events", create: false)
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 3)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        let error = try #require(outcome.fatalError)
        #expect(error.code == .destinationRefused)
        #expect(error.message.contains("missing_events"))
        #expect(error.message.contains("--create-table"))
        await sink.shutdown()
    }

    @Test func aTableOfOtherColumnsIsRefused() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        try cluster.psql("CREATE TABLE events (id text PRIMARY KEY, log_id text NOT NULL, seq integer NOT NULL, body json)", database: database)
        let sink = try makeSink(cluster, database: database, table: "events", create: true)
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 3)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        let error = try #require(outcome.fatalError)
        #expect(error.message.contains("is not Spool's"))
        #expect(error.message.contains("seq integer"))
        #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "0")
        await sink.shutdown()
    }

    @Test func aTableWithoutItsPrimaryKeyIsRefused() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        try cluster.psql("""
            CREATE TABLE events (id text, log_id text NOT NULL, seq bigint NOT NULL, time timestamptz, data jsonb, data_bytes bytea)
            """, database: database)
        let sink = try makeSink(cluster, database: database, table: "events", create: false)
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 3)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        #expect(try #require(outcome.fatalError).message.contains("primary key"))
        await sink.shutdown()
    }

    @Test func aWrongPasswordIsFatalAndNeverPrinted() async throws {
        let cluster = try PostgresCluster.shared()
        let wrong = "not-the-Pa55word"
        let configuration = try PostgresSink.Configuration(
            url: cluster.url(database: "postgres", user: PostgresCluster.passwordRole, password: wrong), table: "events")
        #expect(!configuration.description.contains(wrong))
        #expect(!configuration.redactedURL.contains(wrong))
        let sink = try PostgresSink(configuration: configuration, logID: .random())
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 1)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        let error = try #require(outcome.fatalError)
        #expect(error.message.contains("password authentication failed"))
        #expect(!"\(error)".contains(wrong))
        #expect(!(error.serverMessage ?? "").contains(wrong))
        await sink.shutdown()
    }

    @Test func theRightPasswordFromTheEnvironmentConnects() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let configuration = try PostgresSink.Configuration(
            url: cluster.url(database: database, user: PostgresCluster.passwordRole), table: "events", password: PostgresCluster.password)
        var withCreate = configuration
        withCreate.createTable = true
        let sink = try PostgresSink(configuration: withCreate, logID: .random())
        #expect(await sink.send(sink.prepare(read: sampleRecords(count: 10)[...], maxBytes: 1 << 20).body, timeout: .seconds(30)).isAccepted)
        #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "10")
        await sink.shutdown()
    }

    @Test func noPasswordWhereOneIsAskedIsFatal() async throws {
        let cluster = try PostgresCluster.shared()
        let configuration = try PostgresSink.Configuration(
            url: cluster.url(database: "postgres", user: PostgresCluster.passwordRole), table: "events")
        let sink = try PostgresSink(configuration: configuration, logID: .random())
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 1)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        #expect(try #require(outcome.fatalError).message.contains("password"))
        await sink.shutdown()
    }

    @Test func noServerIsRetried() async throws {
        let port = try freePort()
        let configuration = try PostgresSink.Configuration(url: "postgres://postgres@127.0.0.1:\(port)/postgres", table: "events")
        let sink = try PostgresSink(configuration: configuration, logID: .random())
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 1)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        guard case .retry(let error) = outcome else {
            Issue.record("expected a retry, got \(outcome)")
            return
        }
        #expect(error.code == .network)
        await sink.shutdown()
    }

    /// `{"n": 1e1000000}` is valid JSON that `jsonb` refuses (beyond `numeric`): PostgreSQL
    /// refuses its batch (class 22), the worker splits it down to the record, and the sink
    /// then stores the record's exact bytes in `data_bytes`, as the docs promise for every
    /// record `jsonb` does not take (issue #33: it went to the dead-letter log).
    @Test func aNumberJSONBRefusesLandsInDataBytes() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let logID = LogID.random()
        let sink = try makeSink(cluster, database: database, table: "events", create: true, logID: logID)
        let poison = Array(#"{"n": 1e1000000}"#.utf8)
        let records = [Record(seq: 6, timestamp: 0, payload: Array(#"{"a":1}"#.utf8)), Record(seq: 7, timestamp: 0, payload: poison)]
        // Together, the batch is refused (the worker splits it); the sink never guesses which row.
        let together = await sink.send(sink.prepare(exactlyRead: records).body, timeout: .seconds(30))
        if case .rejected = together {} else { Issue.record("expected the batch to be refused, got \(together)") }
        for record in records {
            #expect(await sink.send(sink.prepare(exactlyRead: [record]).body, timeout: .seconds(30)).isAccepted)
        }
        let rows = try cluster.psql("SELECT seq, data IS NULL, encode(data_bytes, 'hex') FROM events ORDER BY seq", database: database)
        #expect(rows == "6|f|\n7|t|" + poison.map { String(format: "%02x", $0) }.joined(), "\(rows)")
        await sink.shutdown()
    }

    /// A value PostgreSQL refuses wherever the record goes (a time before `timestamptz`'s
    /// range, 4714 BC) rejects its lone record, which the worker dead-letters; the message
    /// names no value.
    @Test func aValuePostgresRefusesRejectsTheRequest() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let sink = try makeSink(cluster, database: database, table: "events", create: true)
        let poison = Record(seq: 7, timestamp: -300_000_000_000_000, payload: Array(#"{"n": 1e1000000}"#.utf8))
        let outcome = await sink.send(sink.prepare(exactlyRead: [poison]).body, timeout: .seconds(30))
        if case .rejected(let error) = outcome {
            #expect(!error.message.contains("1e1000000"))
        } else {
            Issue.record("expected a rejection, got \(outcome)")
        }
        #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "0")
        await sink.shutdown()
    }

    @Test func aCrashOfPostgresIsRetriedAndNothingIsLostOrDoubled() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let logID = LogID.random()
        let sink = try makeSink(cluster, database: database, table: "events", create: true, logID: logID)
        let records = sampleRecords(count: 3000)
        var rest = records[...]
        var retries = 0
        var crashed = false
        while !rest.isEmpty {
            let request = sink.prepare(read: rest, maxBytes: 2048)
            if !crashed && rest.count < records.count / 2 {
                try cluster.stop(mode: "immediate")
                crashed = true
                #expect(!(await sink.send(request.body, timeout: .seconds(30)).isAccepted))
                try cluster.start()
            }
            switch await sink.send(request.body, timeout: .seconds(30)) {
            case .accepted:
                rest = rest.dropFirst(request.count)
            case .retry:
                retries += 1
                #expect(retries < 100)
                try await Task.sleep(for: .milliseconds(100))
            case let other:
                Issue.record("unexpected \(other)")
                return
            }
        }
        await sink.shutdown()
        try expectTable(cluster, database: database, table: "events", holds: records, logID: logID)
    }

    @Test func whatJSONBTakes() {
        #expect(PostgresTableRow.isJSONB(Array(#"{"a":"\\u0000"}"#.utf8)))  // an escaped backslash, then text
        #expect(!PostgresTableRow.isJSONB(Array(#"{"a":"\u0000"}"#.utf8)))
        #expect(!PostgresTableRow.isJSONB(Array(#"["\ud800"]"#.utf8)))
        #expect(!PostgresTableRow.isJSONB(Array(#"["\udc00\ud800"]"#.utf8)))
        #expect(PostgresTableRow.isJSONB(Array(#"["\ud83d\ude00"]"#.utf8)))
        #expect(PostgresTableRow.isJSONB(Array("42".utf8)))
        #expect(!PostgresTableRow.isJSONB([0xFF, 0x7B]))
        #expect(!PostgresTableRow.isJSONB(Array("plain".utf8)))
    }

    @Test func urlsAreReadAndPasswordsNeverPrinted() throws {
        let configuration = try PostgresSink.Configuration(url: "postgresql://me:p%40ss@db.example:6543/app?sslmode=require", table: "a.events")
        #expect(configuration.password == "p@ss")
        #expect(configuration.port == 6543)
        #expect(configuration.database == "app")
        #expect(configuration.tls == .require)
        #expect(configuration.redactedURL == "postgres://me@db.example:6543/app?sslmode=require")
        #expect(TableName("a.events")?.quoted == #""a"."events""#)
        #expect(throws: SyncError.self) { try PostgresSink.Configuration(url: "postgres://me:pw@h/db", table: "bad name;") }
        do {
            _ = try PostgresSink.Configuration(url: "postgres://me:pw@h/db?x=1", table: "t")
            Issue.record("an unknown parameter was accepted")
        } catch {
            #expect(!"\(error)".contains("pw"))
        }
        #expect(PostgresSink.Configuration.redact("postgres://me:pw@h:1/db") == "postgres://me@h:1/db")
    }
} }

// MARK: - Helpers

func makeSink(
    _ cluster: PostgresCluster, database: String, table: String, create: Bool, logID: LogID = .random()
) throws -> PostgresSink {
    var configuration = try PostgresSink.Configuration(url: cluster.url(database: database), table: table)
    configuration.createTable = create
    return try PostgresSink(configuration: configuration, logID: logID)
}

/// Records of every kind: JSON objects, JSON scalars, bytes that are not UTF-8, text that is
/// not JSON, and JSON that `jsonb` refuses (`\u0000`).
extension PostgresSink {
    /// The request for the longest prefix of `records` as read: unwrapped by the sink's
    /// unwrapper, as the worker hands them to it.
    func prepare(read records: ArraySlice<Record>, maxBytes: Int) -> SinkRequest<PostgresBatch> {
        prepare(unwrapped(records)[...], maxBytes: maxBytes)
    }

    /// The request for exactly `records` as read, unwrapped as the worker does.
    func prepare(exactlyRead records: [Record]) -> SinkRequest<PostgresBatch> {
        prepare(exactly: unwrapped(records))
    }

    private func unwrapped(_ records: some Collection<Record>) -> [OutgoingRecord] {
        guard let unwrapper else { preconditionFailure("a PostgresSink names its unwrapper") }
        return unwrapper.unwrap(records)
    }
}

func sampleRecords(count: Int, start: UInt64 = 0) -> [Record] {
    (start..<start + UInt64(count)).map { seq in
        let payload: [UInt8] = switch seq % 5 {
        case 0: Array(#"{"n":\#(seq),"s":"héllo \"q\" ☃","a":[1,2,{"b":null}]}"#.utf8)
        case 1: [0xFF, 0xFE, 0x00, UInt8(seq % 256)]
        case 2: Array("plain text \(seq)".utf8)
        case 3: Array(#"{"nul":"a\u0000b","n":\#(seq)}"#.utf8)
        default: Array("\(seq)".utf8)
        }
        return Record(seq: seq, timestamp: 1_700_000_000_000 + Int64(seq), payload: payload)
    }
}

/// Checks that `table` holds exactly `records`, once each: ids, seqs, times, JSON in `data`
/// (compared as JSON values), any other record's exact bytes in `data_bytes`.
func expectTable(
    _ cluster: PostgresCluster, database: String, table: String, holds records: [Record], logID: LogID, times: Bool = true
) throws {
    let separator = "\u{1f}"
    let output = try cluster.run("psql", [
        "-h", cluster.directory, "-p", "\(cluster.port)", "-U", "postgres", "-d", database, "-X", "-At", "-F", separator, "-c",
        """
        SELECT id, log_id, seq, (extract(epoch from time) * 1000)::bigint, coalesce(data::text, ''),
        data IS NULL, coalesce(encode(data_bytes, 'hex'), ''), data_bytes IS NULL FROM \(table) ORDER BY seq
        """,
    ])
    let rows = output.split(separator: "\n").map { $0.components(separatedBy: separator) }
    #expect(rows.count == records.count)
    #expect(Set(rows.map { $0[0] }).count == rows.count)
    for (row, record) in zip(rows, records) {
        #expect(row[0] == logID.eventID(seq: record.seq))
        #expect(row[1] == logID.description)
        #expect(row[2] == "\(record.seq)")
        if times { #expect(row[3] == "\(record.timestamp)") }
        if PostgresTableRow.isJSONB(record.payload) {
            #expect(row[5] == "f" && row[7] == "t", "record \(record.seq) belongs in data")
            let stored = try JSONSerialization.jsonObject(with: Data(row[4].utf8), options: .fragmentsAllowed) as? NSObject
            let sent = try JSONSerialization.jsonObject(with: Data(record.payload), options: .fragmentsAllowed) as? NSObject
            #expect(stored == sent, "record \(record.seq)")
        } else {
            #expect(row[5] == "t" && row[7] == "f", "record \(record.seq) belongs in data_bytes")
            #expect(row[6] == record.payload.map { String(format: "%02x", $0) }.joined(), "record \(record.seq)")
        }
    }
}

extension SinkOutcome {
    var isAccepted: Bool {
        if case .accepted = self { return true }
        return false
    }

    var fatalError: SyncError? {
        if case .fatal(let error) = self { return error }
        return nil
    }
}
