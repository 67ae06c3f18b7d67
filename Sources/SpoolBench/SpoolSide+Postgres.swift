import Foundation
import Spool
import SpoolPostgres
import SpoolSync

extension SpoolSide {
    /// Stores `count` events (untimed), creates a new table, and times one flush of them into
    /// it through `PostgresSink`: 1,000 rows a transaction, `concurrency` in flight.
    func drainToPostgres(url: String, count: Int, directory: String, concurrency: SyncConfiguration.Concurrency) async throws -> Run {
        let table = try Self.newTable(url: url)
        defer { _ = try? Self.psql(url: url, ["-c", "DROP TABLE \(table)"]) }
        return try await drain(batch: 1000, batchBytes: 4 << 20, count: count, directory: directory, concurrency: concurrency,
                               backoff: nil) { log, _ in
            try PostgresSink(configuration: try PostgresSink.Configuration(url: url, table: table), logID: log)
        }
    }

    /// The database's ceiling: `COPY table FROM STDIN` by psql of the same rows (the first
    /// `count` events, as `data`, with ids, log id, seqs and a time), written to a file
    /// beforehand, into a new table like the sink's. Only psql's run is timed.
    func copyIntoPostgres(url: String, count: Int, directory: String) async throws -> Run {
        let table = try Self.newTable(url: url)
        defer { _ = try? Self.psql(url: url, ["-c", "DROP TABLE \(table)"]) }
        let log = LogID.random()
        let file = directory + "/rows.copy"
        var text = [UInt8]()
        text.reserveCapacity(count * (Int(events.meanSize) + 90))
        for seq in 0..<count {
            text += Array("\(log.eventID(seq: UInt64(seq)))\t\(log)\t\(seq)\t2026-11-25 12:00:00.000+00\t".utf8)
            // COPY's text format: a backslash, tab, newline or carriage return is escaped.
            for byte in events.events[seq % events.events.count] {
                switch byte {
                case UInt8(ascii: "\\"): text += Array(#"\\"#.utf8)
                case 0x09: text += Array(#"\t"#.utf8)
                case 0x0A: text += Array(#"\n"#.utf8)
                case 0x0D: text += Array(#"\r"#.utf8)
                default: text.append(byte)
                }
            }
            text += Array("\t\\N\n".utf8)
        }
        try Data(text).write(to: URL(fileURLWithPath: file))
        let start = monotonicNanos()
        try await blocking { _ = try Self.psql(url: url, ["-c", "COPY \(table) FROM STDIN"], input: file) }
        let nanos = monotonicNanos() - start
        let landed = try Self.psql(url: url, ["-At", "-c", "SELECT count(*) FROM \(table)"])
        guard landed == "\(count)" else { throw BenchError("COPY stored \(landed) of \(count) rows") }
        return Run(count: count, nanos: nanos)
    }

    /// A new table like the sink's, named `bench_…`.
    static func newTable(url: String) throws -> String {
        let table = "bench_\(UUID().uuidString.prefix(8).lowercased())"
        try psql(url: url, ["-c", """
            CREATE TABLE \(table) (id text PRIMARY KEY, log_id text NOT NULL, seq bigint NOT NULL, time timestamptz, \
            data jsonb, data_bytes bytea)
            """])
        return table
    }

    /// Runs psql on `url` (with `-X -q -v ON_ERROR_STOP=1`), standard input from `input`;
    /// returns its output.
    @discardableResult
    static func psql(url: String, _ arguments: [String], input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/psql")
        process.arguments = ["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = try input.map { try FileHandle(forReadingFrom: URL(fileURLWithPath: $0)) } ?? FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0 else { throw BenchError("psql failed: \(text)") }
        return text
    }
}
