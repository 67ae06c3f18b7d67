import Foundation
import Synchronization

/// A PostgreSQL 15 cluster of the process's own (the PostgreSQL tests, the fleet tests, the
/// benchmark's fleet): `initdb` into a temporary directory, `pg_ctl start` on a free port of
/// 127.0.0.1, stopped (`pg_ctl stop -m fast`) and removed when the process exits, and by a
/// watchdog if it is killed. Run as the `postgres` user when the process runs as root.
///
/// Loopback connections are trusted, except for the role ``passwordRole``, which must give
/// ``password`` (SCRAM). When the cluster cannot start, ``shared()`` throws the reason, and the
/// test asking for it fails: it is never skipped.
package final class PostgresCluster: Sendable {
    /// The binaries: Debian's PostgreSQL 15 (`apt-get install postgresql`).
    package static let binaries = ProcessInfo.processInfo.environment["SPOOL_PG_BIN"] ?? "/usr/lib/postgresql/15/bin"
    /// The role that must authenticate with a password.
    package static let passwordRole = "spool_pw"
    /// Its password.
    package static let password = "s3cret-Pa55"

    /// Where the cluster lives: its data directory, logs and Unix socket.
    package let directory: String
    /// The port it listens on, on 127.0.0.1.
    package let port: Int
    /// Its `max_connections`: past it, PostgreSQL refuses a connection with SQLSTATE 53300
    /// (`too_many_connections`).
    package let maxConnections: Int
    private let asPostgres: Bool

    /// The cluster of this process: started by the first caller, shared by every test.
    package static func shared() throws -> PostgresCluster {
        try startup.get()
    }

    /// A cluster of the caller's own, for a test that may run beside the PostgreSQL suites in
    /// one process (a plain `swift test`): they stop and crash the shared one. `maxConnections`
    /// is its `max_connections` (the default 200; at least 4, as 3 are kept for superusers).
    package static func own(maxConnections: Int = 200) throws -> PostgresCluster {
        do {
            let cluster = try PostgresCluster(maxConnections: maxConnections)
            registerStopAtExit(cluster)
            return cluster
        } catch let error as ServerError {
            throw error
        } catch {
            throw ServerError("\(error)")
        }
    }

    private static let startup: Result<PostgresCluster, ServerError> = Result { try own() }.mapError { $0 as? ServerError ?? ServerError("\($0)") }

    private init(maxConnections: Int) throws {
        self.maxConnections = maxConnections
        guard FileManager.default.isExecutableFile(atPath: Self.binaries + "/initdb") else {
            throw ServerError("no PostgreSQL at \(Self.binaries) (apt-get install postgresql, or set SPOOL_PG_BIN)")
        }
        asPostgres = geteuid() == 0
        var template = Array((NSTemporaryDirectory() + "spool-pg-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw ServerError("mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        port = try freePort()
        if asPostgres {
            guard let user = getpwnam("postgres") else { throw ServerError("running as root and there is no postgres user") }
            guard chown(directory, user.pointee.pw_uid, user.pointee.pw_gid) == 0 else {
                throw ServerError("chown of \(directory) to postgres failed: errno \(errno)")
            }
        }
        try run("initdb", ["-D", dataDirectory, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync"])
        let hba = """
            local all all trust
            host all \(Self.passwordRole) 127.0.0.1/32 scram-sha-256
            host all all 127.0.0.1/32 trust

            """
        try run("sh", ["-c", "cat > '\(dataDirectory)/pg_hba.conf'"], input: hba)
        try start()
        try watchOver(testProcess: getpid())
        try psql("CREATE ROLE \(Self.passwordRole) LOGIN PASSWORD '\(Self.password)' SUPERUSER")
    }

    package var dataDirectory: String { directory + "/data" }

    /// Starts the server (again, after ``stop(mode:)``), waiting until it takes connections.
    package func start() throws {
        // Output to a file: the server inherits pg_ctl's descriptors, and a pipe would never end.
        try run("pg_ctl", [
            "start", "-D", dataDirectory, "-l", directory + "/server.log", "-w", "-t", "120",
            "-o", "-p \(port) -c listen_addresses=127.0.0.1 -c unix_socket_directories='\(directory)' -c max_connections=\(maxConnections)",
        ], outputFile: directory + "/pg_ctl.out")
    }

    /// A watchdog that crashes the server and removes the cluster once the test process is
    /// gone, however it ended (a SIGKILL, a timeout): no cluster outlives its tests.
    private func watchOver(testProcess pid: pid_t) throws {
        let script = """
            while [ -d /proc/\(pid) ]; do sleep 1; done
            '\(Self.binaries)/pg_ctl' stop -D '\(dataDirectory)' -m immediate >/dev/null 2>&1
            rm -rf '\(directory)'
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: asPostgres ? "/usr/sbin/runuser" : "/bin/sh")
        process.arguments = (asPostgres ? ["-u", "postgres", "--", "/bin/sh"] : []) + ["-c", script]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Stops the server: `immediate` is a crash (no checkpoint, recovery at the next start).
    package func stop(mode: String = "fast") throws {
        try run("pg_ctl", ["stop", "-D", dataDirectory, "-m", mode, "-w", "-t", "120"])
    }

    /// A fresh database for one test.
    package func createDatabase(_ name: String = "db_\(UUID().uuidString.prefix(8).lowercased())") throws -> String {
        try psql("CREATE DATABASE \(name)")
        return name
    }

    /// `postgres://USER@127.0.0.1:PORT/DATABASE`.
    package func url(database: String, user: String = "postgres", password: String? = nil) -> String {
        "postgres://\(user)\(password.map { ":" + $0 } ?? "")@127.0.0.1:\(port)/\(database)"
    }

    /// Runs `sql` with psql over the Unix socket; returns its unaligned output.
    @discardableResult
    package func psql(_ sql: String, database: String = "postgres") throws -> String {
        try run("psql", ["-h", directory, "-p", "\(port)", "-U", "postgres", "-d", database, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Runs one of the binaries (or `sh`) as the cluster's owner; throws its output when it fails.
    @discardableResult
    package func run(_ tool: String, _ arguments: [String], input: String? = nil, outputFile: String? = nil) throws -> String {
        let executable = tool == "sh" ? "/bin/sh" : Self.binaries + "/" + tool
        // Through bash, which closes every descriptor above 2 first: Foundation's Process
        // hands its children a socket it waits on, and a server that inherited it (pg_ctl
        // start daemonizes postgres) would keep `waitUntilExit` waiting forever.
        let closing = #"for fd in /proc/$$/fd/*; do n=${fd##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-" 2>/dev/null; done; exec "$@""#
        let command = ["/bin/bash", "-c", closing, "bash", executable] + arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: asPostgres ? "/usr/sbin/runuser" : command[0])
        process.arguments = asPostgres ? ["-u", "postgres", "--"] + command : Array(command.dropFirst())
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let output = Pipe()
        let inputPipe = Pipe()
        if let outputFile {
            _ = FileManager.default.createFile(atPath: outputFile, contents: nil)
            let file = try FileHandle(forWritingTo: URL(fileURLWithPath: outputFile))
            process.standardOutput = file
            process.standardError = file
            try? output.fileHandleForWriting.close()
        } else {
            process.standardOutput = output
            process.standardError = output
        }
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
        try process.run()
        if let input {
            try inputPipe.fileHandleForWriting.write(contentsOf: Data(input.utf8))
            try inputPipe.fileHandleForWriting.close()
        }
        let data = outputFile == nil ? output.fileHandleForReading.readDataToEndOfFile() : Data()
        process.waitUntilExit()
        let text = outputFile.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw ServerError("\(tool) \(arguments.prefix(1).joined()) failed (\(process.terminationStatus)): \(text)")
        }
        return text
    }
}

/// The clusters to stop when the process exits.
private let clustersToStop = Mutex<[PostgresCluster]>([])

private func registerStopAtExit(_ cluster: PostgresCluster) {
    let first = clustersToStop.withLock { clusters in
        clusters.append(cluster)
        return clusters.count == 1
    }
    guard first else { return }
    atexit {
        for cluster in clustersToStop.withLock({ $0 }) {
            try? cluster.stop(mode: "fast")
            try? FileManager.default.removeItem(atPath: cluster.directory)
        }
    }
}
