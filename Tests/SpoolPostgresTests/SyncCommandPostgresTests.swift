import Foundation
import Spool
import SpoolServers
import Testing

/// `spool sync --postgres` as a real process: SIGKILLed mid-run and run again, beside a
/// PostgreSQL that crashes, and refused with errors that name the table and never the password.
extension PostgresSuites { @Suite struct SyncCommandPostgresTests {
    /// `.build/<config>/spool`, beside the test bundle.
    static var binary: String {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("spool").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("spool").path
    }

    /// Starts `spool sync arguments…`, its output into files of `directory`.
    static func sync(_ arguments: [String], output directory: String, environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["sync"] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        for name in ["out", "err"] { _ = FileManager.default.createFile(atPath: "\(directory)/sync.\(name)", contents: nil) }
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(directory)/sync.out"))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(directory)/sync.err"))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs `spool sync arguments…` to its end; returns its status, output and errors.
    static func syncToEnd(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, out: String, err: String) {
        let directory = Self.scratch("run")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try sync(arguments, output: directory, environment: environment)
        process.waitUntilExit()
        let read = { (name: String) in (try? String(contentsOfFile: "\(directory)/sync.\(name)", encoding: .utf8)) ?? "" }
        return (process.terminationStatus, read("out"), read("err"))
    }

    static func scratch(_ name: String) -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("spool-pg-cli-\(name)-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A log of `count` records of every kind (JSON, JSON jsonb refuses, text, non-UTF-8).
    static func makeLog(count: Int) throws -> (directory: String, logID: LogID, records: [Record]) {
        let directory = scratch("log")
        let log = try EventLog.open(directory: directory + "/log")
        let records = sampleRecords(count: count)
        for record in records { _ = try log.append(record.payload) }
        let logID = log.id
        try log.close()
        return (directory + "/log", logID, records)
    }

    /// Every record lands exactly once, byte for byte, through SIGKILLs of `spool sync
    /// --postgres --sidecar` with adaptive concurrency while transactions are in flight.
    @Test func killedSyncsInsertEveryRecordOnce() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, logID, records) = try Self.makeLog(count: 20_000)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let arguments = [directory, "--postgres", cluster.url(database: database), "--table", "events", "--create-table",
                         "--consumer", "pg", "--create", "--once", "--sidecar", "--batch-count", "200",
                         "--concurrency", "adaptive", "--retries", "50"]
        var killed = 0
        for round in 0..<6 {
            let process = try Self.sync(arguments, output: (directory as NSString).deletingLastPathComponent)
            try await Task.sleep(for: .milliseconds(300 + 200 * round))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                killed += 1
            }
            process.waitUntilExit()
        }
        let last = try Self.syncToEnd(arguments)
        #expect(last.status == 0, "\(last.err)")
        #expect(killed > 0, "at least one run was killed mid-run")
        try expectTable(cluster, database: database, table: "events", holds: records, logID: logID, times: false)
    }

    /// PostgreSQL crashed (`pg_ctl stop -m immediate`) under a running `spool sync` and
    /// started again: the sync retries and `count(*)` equals the records appended, once each.
    @Test func aCrashOfPostgresUnderARunningSyncLosesNothing() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, logID, records) = try Self.makeLog(count: 30_000)
        let scratch = (directory as NSString).deletingLastPathComponent
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let process = try Self.sync([directory, "--postgres", cluster.url(database: database), "--table", "events", "--create-table",
                                     "--consumer", "pg", "--create", "--batch-count", "100", "--concurrency", "4"], output: scratch)
        // Crash it once some records are in, not all.
        var landed = 0
        for _ in 0..<600 where landed == 0 {
            try await Task.sleep(for: .milliseconds(20))
            landed = Int((try? cluster.psql("SELECT count(*) FROM events", database: database)) ?? "0") ?? 0
        }
        try cluster.stop(mode: "immediate")
        try await Task.sleep(for: .seconds(1))
        try cluster.start()
        var count = 0
        for _ in 0..<600 where count < records.count {
            try await Task.sleep(for: .milliseconds(100))
            count = Int((try? cluster.psql("SELECT count(*) FROM events", database: database)) ?? "0") ?? 0
        }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(landed < records.count, "the crash came before the last record")
        #expect(process.terminationStatus == 0)
        try expectTable(cluster, database: database, table: "events", holds: records, logID: logID, times: false)
    }

    @Test func aMissingTableStopsTheSyncNamingIt() throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, _, _) = try Self.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let run = try Self.syncToEnd([directory, "--postgres", cluster.url(database: database), "--table", "no_such_events",
                                      "--create", "--once"])
        #expect(run.status == 1)
        #expect(run.err.contains("no_such_events"), "\(run.err)")
        #expect(run.err.contains("--create-table"), "\(run.err)")
        #expect(try cluster.psql("SELECT to_regclass('no_such_events') IS NULL", database: database) == "t")
    }

    @Test func aTableOfOtherColumnsIsRefused() throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        try cluster.psql("CREATE TABLE events (id text PRIMARY KEY, body text)", database: database)
        let (directory, _, _) = try Self.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let run = try Self.syncToEnd([directory, "--postgres", cluster.url(database: database), "--table", "events",
                                      "--create-table", "--create", "--once"])
        #expect(run.status == 1)
        #expect(run.err.contains("is not Spool's"), "\(run.err)")
    }

    /// A wrong password stops the sync with the server's answer; the password appears
    /// nowhere in what spool prints. The right one from PGPASSWORD delivers.
    @Test func passwordsAreUsedAndNeverPrinted() throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, _, _) = try Self.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let wrong = "Wr0ng-pa55word"
        let url = cluster.url(database: database, user: PostgresCluster.passwordRole, password: wrong)
        let refused = try Self.syncToEnd([directory, "--postgres", url, "--table", "events", "--create-table", "--create", "--once"])
        #expect(refused.status == 1)
        #expect(refused.err.contains("password authentication failed"), "\(refused.err)")
        #expect(!(refused.out + refused.err).contains(wrong))
        let byEnvironment = try Self.syncToEnd(
            [directory, "--postgres", cluster.url(database: database, user: PostgresCluster.passwordRole), "--table", "events",
             "--create-table", "--create", "--once"],
            environment: ["PGPASSWORD": wrong])
        #expect(byEnvironment.status == 1)
        #expect(!(byEnvironment.out + byEnvironment.err).contains(wrong))
        let accepted = try Self.syncToEnd(
            [directory, "--postgres", cluster.url(database: database, user: PostgresCluster.passwordRole), "--table", "events",
             "--create-table", "--create", "--once"],
            environment: ["PGPASSWORD": PostgresCluster.password])
        #expect(accepted.status == 0, "\(accepted.err)")
        #expect(!(accepted.out + accepted.err).contains(PostgresCluster.password))
        #expect(try cluster.psql("SELECT count(*) FROM events", database: database) == "10")
    }
} }
