import Foundation
import Spool
import SpoolServers
import Testing

/// `spool sync --postgres` as a service (no `--once`) meeting a refusal no retry can change
/// (issue #33): it used to print its start line, stay alive, deliver nothing and exit 0 on
/// SIGTERM. It must print the error with its reason and exit 1, so a supervisor
/// (`Restart=on-failure`) sees it.
extension PostgresSuites { @Suite struct SyncServicePostgresTests {
    typealias CLI = SyncCommandPostgresTests

    /// Runs `spool sync arguments…` until it exits by itself, for at most two minutes (then it
    /// is stopped with SIGTERM and its status is `nil`); returns its status and errors.
    static func runUntilItEnds(_ arguments: [String], environment: [String: String] = [:],
                               meanwhile: (() async throws -> Void)? = nil) async throws -> (status: Int32?, err: String) {
        let directory = CLI.scratch("service")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = try CLI.sync(arguments, output: directory, environment: environment)
        try await meanwhile?()
        let ended = await process.endsByItself(within: .seconds(120))
        let err = (try? String(contentsOfFile: "\(directory)/sync.err", encoding: .utf8)) ?? ""
        return (ended ? process.terminationStatus : nil, err)
    }

    @Test func aMissingTableEndsTheServiceNamingIt() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, _, _) = try CLI.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let run = try await Self.runUntilItEnds([directory, "--postgres", cluster.url(database: database), "--table", "no_such_events", "--create"])
        #expect(run.status == 1, "\(run.err)")
        #expect(run.err.contains("no_such_events") && run.err.contains("--create-table"), "\(run.err)")
    }

    @Test func aWrongPasswordEndsTheServiceWithoutPrintingIt() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, _, _) = try CLI.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        let wrong = "Wr0ng-pa55word"
        let url = cluster.url(database: database, user: PostgresCluster.passwordRole, password: wrong)
        let run = try await Self.runUntilItEnds([directory, "--postgres", url, "--table", "events", "--create-table", "--create"])
        #expect(run.status == 1, "\(run.err)")
        #expect(run.err.contains("password authentication failed"), "\(run.err)")
        #expect(!run.err.contains(wrong))
    }

    /// The table is dropped while the service runs: the next insert ends it.
    @Test func aTableDroppedMidRunEndsTheService() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let (directory, _, _) = try CLI.makeLog(count: 10)
        defer { try? FileManager.default.removeItem(atPath: (directory as NSString).deletingLastPathComponent) }
        // A sidecar, so `spool append` can write beside it; --count 1 flushes each new record.
        let run = try await Self.runUntilItEnds([directory, "--postgres", cluster.url(database: database), "--table", "events",
                                                 "--create-table", "--create", "--sidecar", "--count", "1"]) {
            var landed = "0"
            for _ in 0..<1200 where landed != "10" {
                try await Task.sleep(for: .milliseconds(50))
                landed = (try? cluster.psql("SELECT count(*) FROM events", database: database)) ?? "0"
            }
            #expect(landed == "10", "the service delivered the first records")
            try cluster.psql("DROP TABLE events", database: database)
            let append = try SpoolBinary.run(["append", directory], input: Data(#"{"after":"drop"}"#.utf8 + [0x0A]))
            #expect(append.status == 0, "\(append.err)")
        }
        #expect(run.status == 1, "\(run.err)")
        #expect(run.err.contains("events") && run.err.contains("42P01"), "\(run.err)")
    }

    /// `--group`: a writer's worker stopped for good ends the whole service, naming the writer.
    @Test func aMissingTableEndsAGroupServiceNamingTheWriter() async throws {
        let cluster = try PostgresCluster.shared()
        let database = try cluster.createDatabase()
        let group = CLI.scratch("group")
        defer { try? FileManager.default.removeItem(atPath: group) }
        let append = try SpoolBinary.run(["append", group, "--writer", "app"], input: Data(#"{"n":1}"#.utf8 + [0x0A]))
        #expect(append.status == 0, "\(append.err)")
        let run = try await Self.runUntilItEnds([group, "--group", "--postgres", cluster.url(database: database), "--table", "no_such_events"])
        #expect(run.status == 1, "\(run.err)")
        #expect(run.err.contains("writer app") && run.err.contains("no_such_events"), "\(run.err)")
    }
} }

/// `spool` beside the test bundle, run to its end.
enum SpoolBinary {
    static func run(_ arguments: [String], input: Data) throws -> (status: Int32, err: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PostgresSuites.SyncCommandPostgresTests.binary)
        process.arguments = arguments
        let stdin = Pipe(), stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: err, as: UTF8.self))
    }
}
