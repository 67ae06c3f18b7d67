import Foundation
import SpoolServers
import Spool
import SpoolSync
import Testing
@testable import SpoolPostgres

/// `sslmode` against a real PostgreSQL 15 with TLS on (a cluster of this suite's own, with a
/// self-signed certificate made by `openssl`), and against one without TLS.
@Suite struct PostgresTLSTests {
    /// A cluster serving TLS with a fresh self-signed certificate for 127.0.0.1.
    static let tlsCluster: Result<PostgresCluster, ServerError> = Result {
        let cluster = try PostgresCluster.own()
        try cluster.run("sh", ["-c", """
            cd '\(cluster.dataDirectory)' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
              -keyout server.key -out server.crt 2>/dev/null && chmod 600 server.key
            """])
        try cluster.psql("ALTER SYSTEM SET ssl = on")
        try cluster.psql("SELECT pg_reload_conf()")
        for _ in 0..<100 where (try? cluster.psql("SHOW ssl")) != "on" { usleep(50_000) }
        guard try cluster.psql("SHOW ssl") == "on" else { throw ServerError("the cluster did not turn TLS on: \((try? cluster.psql("SHOW ssl")) ?? "?")") }
        return cluster
    }.mapError { $0 as? ServerError ?? ServerError("\($0)") }

    func sink(_ cluster: PostgresCluster, database: String, sslmode: String) throws -> PostgresSink {
        var configuration = try PostgresSink.Configuration(url: cluster.url(database: database) + "?sslmode=\(sslmode)", table: "events")
        configuration.createTable = true
        return try PostgresSink(configuration: configuration, logID: .random())
    }

    @Test func requireDeliversOverTLS() async throws {
        let cluster = try Self.tlsCluster.get()
        let database = try cluster.createDatabase()
        let sink = try sink(cluster, database: database, sslmode: "require")
        let records = sampleRecords(count: 50)
        #expect(await sink.send(sink.prepare(read: records[...], maxBytes: 1 << 20).body, timeout: .seconds(30)).isAccepted)
        // The sink's connection is still open: the server says it is encrypted.
        let encrypted = try cluster.psql("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND datname = '\(database)'")
        #expect(Int(encrypted) ?? 0 >= 1, "no TLS connection to \(database): \(encrypted)")
        await sink.shutdown()
        #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "50")
    }

    @Test func verifyFullRefusesACertificateNoRootVouchesFor() async throws {
        let cluster = try Self.tlsCluster.get()
        let database = try cluster.createDatabase()
        let sink = try sink(cluster, database: database, sslmode: "verify-full")
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 1)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        #expect(!outcome.isAccepted, "a self-signed certificate was trusted under verify-full")
        // Not retried for ever: a certificate no root vouches for will not change by waiting.
        let error = try #require(outcome.fatalError, "\(outcome)")
        #expect(error.message.contains("certificate") || error.message.contains("TLS"), "\(error)")
        await sink.shutdown()
        #expect(try cluster.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'events'", database: database) == "0")
    }

    @Test func requireAgainstAServerWithoutTLSIsFatal() async throws {
        let cluster = try PostgresCluster.shared()  // TLS off
        let database = try cluster.createDatabase()
        let sink = try sink(cluster, database: database, sslmode: "require")
        let outcome = await sink.send(sink.prepare(read: sampleRecords(count: 1)[...], maxBytes: 1 << 20).body, timeout: .seconds(30))
        let error = try #require(outcome.fatalError, "\(outcome)")
        #expect(error.message.contains("TLS"), "\(error)")
        await sink.shutdown()
    }
}
