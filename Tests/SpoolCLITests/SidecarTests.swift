import Foundation
import Spool
import Synchronization
import Testing

/// A sidecar `spool sync` beside a `spool append` process (issue #19, consumers in another
/// process): both SIGKILLed at random, independently, for many rounds, with 64 KiB segments so
/// the writer's retention deletes what the sidecar committed. Every acknowledged record reaches
/// the collector, the committed offset never passes what the collector holds, and retention
/// never deletes what the sidecar had not committed (a record deleted unread could never reach
/// the collector).
@Suite struct SidecarTests {
    /// A `spool` child (`spool sync`, mostly), its output discarded or its standard error
    /// appended to a file.
    final class Child: @unchecked Sendable {
        let process = Process()

        /// - Parameters:
        ///   - environment: variables added to the test process's.
        ///   - stderrPath: a file its standard error is appended to (else discarded).
        init(_ arguments: [String], environment: [String: String] = [:], stderrPath: String? = nil) throws {
            process.executableURL = URL(fileURLWithPath: SpoolBinary.path)
            process.arguments = arguments
            if !environment.isEmpty {
                process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            }
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            if let stderrPath {
                if !FileManager.default.fileExists(atPath: stderrPath) { _ = FileManager.default.createFile(atPath: stderrPath, contents: nil) }
                let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
                errors.seekToEndOfFile()
                process.standardError = errors
            } else {
                process.standardError = FileHandle.nullDevice
            }
            try process.run()
        }

        func kill() {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// The collector's `--out` lines as seq → data: whole lines only (the collector may be
    /// writing the next batch while this reads).
    func delivered(_ path: String) throws -> [UInt64: String] {
        var records = [UInt64: String]()
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        let whole = text.hasSuffix("\n") ? text[...] : text[..<(text.lastIndex(of: "\n").map { text.index(after: $0) } ?? text.startIndex)]
        for line in lines(of: String(whole)) {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            if let seq = (object?["seq"] as? NSNumber)?.uint64Value, let data = object?["data"] as? String { records[seq] = data }
        }
        return records
    }

    /// The committed offset of `consumer`, from `spool stat` (a reader beside both processes).
    func committedOffset(_ dir: String, _ consumer: String) throws -> UInt64? {
        let stat = try SpoolBinary.run(["stat", dir])
        for line in stat.stdout.split(separator: "\n") where line.trimmingCharacters(in: .whitespaces).hasPrefix(consumer + " ") {
            let fields = line.split(separator: " ")
            if let index = fields.firstIndex(of: "offset"), index + 1 < fields.count { return UInt64(fields[index + 1]) }
        }
        return nil
    }

    @Test func aSidecarSyncAndAnAppenderKilledIndependentlyDeliverEveryAcknowledgedRecord() throws {
        let dir = temporaryDirectory()
        let out = dir + "-collected.ndjson"
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: out)
        }
        let collector = try CollectorChild(["--out", out], stderrPath: dir + "-collector.err")
        defer {
            collector.stop()
            try? FileManager.default.removeItem(atPath: dir + "-collector.err")
        }
        let url = collector.url

        let syncArguments = ["sync", dir, "--sidecar", "--url", url, "--interval", "0.2", "--count", "20", "--batch-count", "50", "--create"]
        var acknowledged = Set<UInt64>()
        var appenderID = 0
        var appender = try AppenderChild(directory: dir, id: appenderID, capped: false, noisy: true, ack: true)
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: dir + "/META") { usleep(10_000) }
        var sidecar = try Child(syncArguments)
        var random = SplitMix64(seed: UInt64(Date().timeIntervalSince1970))
        var appenderKills = 0, sidecarKills = 0
        for round in 0..<16 {
            usleep(UInt32(150_000 + random.next() % 250_000))
            if random.next() % 2 == 0 {
                appender.kill()
                acknowledged.formUnion(appender.stdout.split(separator: "\n").compactMap { UInt64($0) })
                appenderKills += 1
                appenderID += 1
                appender = try AppenderChild(directory: dir, id: appenderID, capped: false, noisy: true, ack: true)
            }
            if random.next() % 2 == 0 {
                sidecar.kill()
                sidecarKills += 1
                sidecar = try Child(syncArguments)
            }
            // The offset never passes what the collector holds (it commits only answered batches).
            if let offset = try committedOffset(dir, "sync") {
                let held = try delivered(out)
                let missing = (0..<offset).first { held[$0] == nil }
                #expect(missing == nil, "round \(round): committed through \(offset) but the collector lacks seq \(missing ?? 0)")
            }
        }
        appender.kill()
        acknowledged.formUnion(appender.stdout.split(separator: "\n").compactMap { UInt64($0) })
        sidecar.kill()
        #expect(appenderKills + sidecarKills > 0)
        #expect(acknowledged.count > 1_000)

        // What the killed sidecar left: a last sidecar run drains it.
        let drain = try SpoolBinary.run(["sync", dir, "--sidecar", "--url", url, "--once", "--retries", "20"])
        #expect(drain.status == 0, "\(drain.stderr)")
        let held = try delivered(out)
        let lost = acknowledged.subtracting(held.keys)
        #expect(lost.isEmpty, "\(lost.count) acknowledged records never reached the collector, e.g. \(lost.sorted().prefix(5))")
        // Each delivered record is the one stored at its seq (where retention has not deleted it).
        let dump = try SpoolBinary.run(["dump", dir])
        var compared = 0
        for line in dump.stdout.split(separator: "\n") {
            let fields = line.split(separator: "\t", maxSplits: 1)
            guard fields.count == 2, let seq = UInt64(fields[0]) else { continue }
            #expect(held[seq] == String(fields[1]), "seq \(seq): delivered \(held[seq] ?? "nothing")")
            compared += 1
        }
        #expect(dump.stderr.isEmpty, "\(dump.stderr)")
        // Retention deleted delivered segments while the sidecar ran (the writer read its offsets).
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".seg") }.sorted()
        #expect(segments.first.map { $0 != "00000000000000000000.seg" } ?? false,
                "no segment was ever deleted: retention did not follow the sidecar's commits (\(segments.count) segments)")
        #expect(compared > 0)
    }
}
