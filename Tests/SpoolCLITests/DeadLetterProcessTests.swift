import Foundation
import Spool
import Testing

/// The dead-letter log through real processes: `spool append`, `spool collector`, `spool sync`.
@Suite struct DeadLetterProcessTests {
    /// Issue #33: a record of `POISON` and 1,000,000 bytes of 0x01, refused by the collector.
    /// Stored JSON-escaped it grew to 6,000,101 bytes, past the dead-letter log's record limit,
    /// and every `sync --once` failed on it for ever (`deadLetterFailed`), the next record never
    /// delivered. It is stored as its exact bytes, the drain goes on, and `spool sync` of the
    /// dead-letter log sends it again under its own id.
    @Test func aRefusedMegabyteOfControlCharactersIsDeadLetteredAsItIsAndTheNextRecordDelivered() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let poison = Array("POISON".utf8) + [UInt8](repeating: 0x01, count: 1_000_000)
        var input = Data(#"{"n":0}"#.utf8 + [0x0A])
        input.append(contentsOf: poison + [0x0A])
        input.append(contentsOf: Array(#"{"n":2}"#.utf8) + [0x0A])
        let append = try SpoolBinary.run(["append", log, "--durability", "synced"], input: input)
        #expect(append.status == 0, "\(append.stderr)")
        let logID = try withEventLog(directory: log) { $0.id }

        let refusing = try CollectorChild(["--out", dir + "/out.ndjson", "--poison-marker", "POISON"], stderrPath: dir + "/refusing.err")
        defer { refusing.stop() }
        let sync = try SpoolBinary.run(["sync", log, "--url", refusing.url, "--once", "--create", "--retries", "3"])
        #expect(sync.status == 0, "\(sync.stdout) \(sync.stderr)")
        #expect(sync.stdout.contains("1 refused records moved to the dead-letter log"), "\(sync.stdout)")
        #expect(try collectedLines(dir + "/out.ndjson").map(\.id) == [logID.eventID(seq: 0), logID.eventID(seq: 2)])
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.stdout.contains("sync  offset 3  lag 0 records"), "\(stat.stdout)")

        // The dead-letter log: the record's exact bytes and its identity.
        let deadLetters = log + "/deadletter/sync"
        let stored = try dumpOrigins(deadLetters)
        #expect(stored.map(\.id) == [logID.eventID(seq: 1)])
        #expect(stored.first.map { $0.payload == poison } == true, "the exact bytes (not printed: a megabyte)")
        let mode = try FileManager.default.attributesOfItem(atPath: deadLetters)[.posixPermissions] as? NSNumber
        #expect(mode?.uint16Value == 0o700)

        // Sent again, to a collector that takes it: under its own id, byte for byte.
        let taking = try CollectorChild(["--log", dir + "/collected"], stderrPath: dir + "/taking.err")
        defer { taking.stop() }
        let again = try SpoolBinary.run(["sync", deadLetters, "--url", taking.url, "--once", "--create"])
        #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
        taking.stop()
        let collected = try dumpOrigins(dir + "/collected")
        #expect(collected.map(\.id) == [logID.eventID(seq: 1)])
        #expect(collected.first.map { $0.payload == poison } == true, "the exact bytes (not printed: a megabyte)")
    }
}
