import Foundation
import Spool
import Testing

/// Issue #29: four writer processes (an app and its extensions) append to one shared
/// directory, each to its own log (`--writer`), while one `spool sync --group` drains them all;
/// every process is SIGKILLed at random and restarted.
@Suite struct GroupTests {
    /// The collector's `--out` lines as (log id, seq) → the data of each copy received. A copy
    /// stored as a conflict (`<log>-<seq>~<digest>`) counts as a copy of its seq: a sync killed
    /// before it made a writer log's consumer starts that log again from its oldest record, and
    /// the collector, which keeps the digests of each log's latest 4,096 seqs only, cannot
    /// compare a repeat further back, so it stores it rather than drop it (README,
    /// "De-duplication").
    func delivered(_ path: String) throws -> [String: [UInt64: [String]]] {
        var records = [String: [UInt64: [String]]]()
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        for line in lines(of: text) {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            guard let id = object?["id"] as? String, let dash = id.firstIndex(of: "-"),
                  let seq = UInt64(id[id.index(after: dash)...].prefix { $0 != "~" }), let data = object?["data"] as? String else {
                Issue.record("a line the collector wrote has no id or data: \(line.prefix(120))")
                continue
            }
            records[String(id[..<dash]), default: [:]][seq, default: []].append(data)
        }
        return records
    }

    @Test func fourWritersAndAGroupSyncKilledAtRandomDeliverEveryAcknowledgedRecordOfEveryWriter() throws {
        let group = temporaryDirectory()
        let out = group + "-collected.ndjson"
        defer {
            try? FileManager.default.removeItem(atPath: group)
            try? FileManager.default.removeItem(atPath: out)
        }
        let collector = try CollectorChild(["--out", out], stderrPath: group + "-collector.err")
        defer {
            collector.stop()
            try? FileManager.default.removeItem(atPath: group + "-collector.err")
        }
        let url = collector.url

        let writers = ["app", "widget", "notification-service", "share"]
        var acknowledged = [String: Set<UInt64>]()
        var restarts = [Int](repeating: 0, count: writers.count)
        // Payloads differ across writers and restarts ("p<writer>0<restart>-<n>-…").
        func start(_ index: Int) throws -> AppenderChild {
            try AppenderChild(directory: group, id: index * 1_000 + restarts[index], capped: false, noisy: true, ack: true, writer: writers[index])
        }
        var appenders = try writers.indices.map { try start($0) }
        for name in writers {
            for _ in 0..<500 where !FileManager.default.fileExists(atPath: group + "/writers/\(name)/META") { usleep(10_000) }
        }
        let syncArguments = ["sync", group, "--group", "--url", url, "--interval", "0.2", "--count", "20", "--batch-count", "50"]
        var sync = try SidecarTests.Child(syncArguments)
        var random = SplitMix64(seed: UInt64(Date().timeIntervalSince1970))
        var appenderKills = 0, syncKills = 0
        func collect(_ index: Int) {
            acknowledged[writers[index], default: []].formUnion(appenders[index].stdout.split(separator: "\n").compactMap { UInt64($0) })
        }
        for _ in 0..<16 {
            usleep(UInt32(150_000 + random.next() % 250_000))
            let index = Int(random.next() % UInt64(writers.count))
            if random.next() % 2 == 0 {
                appenders[index].kill()
                collect(index)
                appenderKills += 1
                restarts[index] += 1
                appenders[index] = try start(index)
            }
            if random.next() % 3 == 0 {
                sync.kill()
                syncKills += 1
                sync = try SidecarTests.Child(syncArguments)
            }
        }
        for index in writers.indices {
            appenders[index].kill()
            collect(index)
        }
        sync.kill()
        #expect(appenderKills + syncKills > 0)

        // What the killed worker left: a last one-shot group run drains every writer log.
        let drain = try SpoolBinary.run(["sync", group, "--group", "--url", url, "--once", "--retries", "20"])
        #expect(drain.status == 0, "\(drain.stderr)")
        #expect(drain.stdout.contains("total: sent"), "\(drain.stdout)")
        let held = try delivered(out)
        var ids = Set<String>()
        for name in writers {
            let directory = group + "/writers/" + name
            let snapshot = try LogSnapshot(directory: directory)
            let logID = snapshot.id.description
            snapshot.close()
            ids.insert(logID)
            let mine = acknowledged[name] ?? []
            #expect(mine.count > 100, "writer \(name) acknowledged only \(mine.count) records")
            let received = held[logID] ?? [:]
            let lost = mine.subtracting(received.keys)
            #expect(lost.isEmpty, "writer \(name): \(lost.count) acknowledged records never reached the collector, e.g. \(lost.sorted().prefix(5))")
            // Nothing handed out twice: every copy of a (log, seq) is the same record, the one
            // the writer's log holds there (where retention has not deleted it yet).
            for (seq, copies) in received where Set(copies).count > 1 {
                Issue.record("writer \(name): seq \(seq) was delivered as \(Set(copies).count) different records")
            }
            let dump = try SpoolBinary.run(["dump", group, "--writer", name])
            var compared = 0
            for line in dump.stdout.split(separator: "\n") {
                let fields = line.split(separator: "\t", maxSplits: 1)
                guard fields.count == 2, let seq = UInt64(fields[0]) else { continue }
                #expect(received[seq]?.first == String(fields[1]), "writer \(name), seq \(seq): delivered \(received[seq]?.first ?? "nothing")")
                compared += 1
            }
            #expect(compared > 0)
        }
        // Retention follows the group's commits: the drain above committed every writer log to
        // its end, so the next segment a writer rolls lets it delete the ones before (on a
        // loaded machine the writers may have stopped before the group caught up, so each
        // writes on until it has rolled).
        for (index, name) in writers.enumerated() {
            let directory = group + "/writers/" + name
            restarts[index] += 1
            let writer = try start(index)
            func first() -> String? {
                (try? FileManager.default.contentsOfDirectory(atPath: directory))?.filter { $0.hasSuffix(".seg") }.sorted().first
            }
            for _ in 0..<2_000 where first() == "00000000000000000000.seg" { usleep(10_000) }
            writer.kill()
            #expect(first() != "00000000000000000000.seg", "writer \(name): retention deleted nothing the group had committed")
        }
        #expect(ids.count == writers.count, "each writer log has its own id")
        #expect(Set(held.keys) == ids, "the collector got records from logs outside the group: \(held.keys)")
        // The group as the CLI shows it: each writer and the total.
        let stat = try SpoolBinary.run(["stat", group])
        #expect(stat.status == 0)
        #expect(writers.allSatisfy { stat.stdout.contains("writer \($0)") }, "\(stat.stdout)")
        #expect(stat.stdout.contains("in 4 writer logs"), "\(stat.stdout)")
        let verify = try SpoolBinary.run(["verify", group])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        #expect(verify.stdout.contains("ok: no corruption in 4 writer logs"))
    }
}
