import Foundation
import Spool
import SpoolServers
import Testing

/// Issue 33's report, as the user ran it: `spool sync --once` with its default adaptive
/// concurrency, through a real nginx whose small `client_max_body_size` answers its own 413s,
/// while the collector behind it is frozen (nginx answers 504 after its 1 s read timeout) or
/// killed and restarted (502), and the syncs themselves are SIGKILLed and restarted. Five of
/// seven such runs lost a contiguous range of records: the window committed past batches that
/// a 413 had dropped while a read ran. Every record must arrive, over seeds of the test's own;
/// and the same against a collector that answers 413 above a size itself.
///
/// nginx (SpoolBench's `Nginx`) is installed by `scripts/setup`; when it cannot start, the test
/// fails with the reason. Blocking, as the other process tests are.
@Suite(.serialized) struct SyncThrough413Tests {
    /// JSON lines of 40 to 1,000 bytes of hex digits (they compress little, so a request's size
    /// on the wire follows its records'): batches of 50 are 413s at a 6 KiB limit, halves often too.
    static func lines(_ count: Int, seed: UInt64) -> String {
        var random = SplitMix64(seed: seed)
        return (0..<count).map { n in
            let size = 20 + Int(random.next() % 480)
            let pad = (0..<(size / 16 + 1)).map { _ in String(random.next(), radix: 16) }.joined().prefix(size)
            return #"{"n":\#(n),"pad":"\#(pad)"}"#
        }.joined(separator: "\n") + "\n"
    }

    /// One run: `count` records, chaos for `seconds`, then a last `sync --once` that must succeed;
    /// every seq must be in the collector's output.
    func run(seed: UInt64, throughNginx: Bool, count: Int = 3_000, seconds: Double = 6, _ name: String = #function) throws {
        let dir = temporaryDirectory(name)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log", out = dir + "/received.ndjson"
        let append = try SpoolBinary.run(["append", log, "--durability", "synced"], input: Data(Self.lines(count, seed: seed).utf8))
        try #require(append.status == 0, "\(append.stderr)")

        let port = try freePort()
        let limit = throughNginx ? [] : ["--payload-too-large-above", "6144"]
        func collector() throws -> CollectorChild {
            try CollectorChild(["--out", out, "--max-concurrent", "64"] + limit, port: port, stderrPath: dir + "/collector.err")
        }
        var server = try collector()
        defer { server.kill() }
        let nginx = throughNginx ? try Nginx(directory: dir, upstreams: [port], maxBody: "6k", readTimeout: "1s") : nil
        defer { nginx?.stop() }
        let url = nginx?.url ?? server.url
        // The default concurrency (adaptive), a short timeout so a frozen collector costs little.
        let sync = ["sync", log, "--url", url, "--once", "--create", "--retries", "1000", "--timeout", "2"]

        var random = SplitMix64(seed: seed)
        var syncs = 0, kills = 0, freezes = 0, restarts = 0
        var child = try SidecarTests.Child(sync, stderrPath: dir + "/sync.err")
        syncs += 1
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            usleep(UInt32(100_000 + random.next() % 300_000))
            if !child.process.isRunning {
                child = try SidecarTests.Child(sync, stderrPath: dir + "/sync.err")
                syncs += 1
            }
            switch random.next() % 4 {
            case 0:  // the sync dies mid-run and starts again
                child.kill()
                kills += 1
                child = try SidecarTests.Child(sync, stderrPath: dir + "/sync.err")
                syncs += 1
            case 1:  // the collector freezes: requests in flight time out
                kill(server.pid, SIGSTOP)
                usleep(UInt32(300_000 + random.next() % 1_200_000))
                kill(server.pid, SIGCONT)
                freezes += 1
            case 2:  // the collector dies and comes back on the same port
                server.kill()
                usleep(UInt32(50_000 + random.next() % 250_000))
                server = try collector()
                restarts += 1
            default:
                break
            }
        }
        child.kill()

        let last = try SpoolBinary.run(sync)
        #expect(last.status == 0, "the last sync failed: \(last.stderr)")
        let received = Set(Self.seqs(inOutput: out))
        let missing = (0..<UInt64(count)).filter { !received.contains($0) }
        #expect(missing.isEmpty, """
            seed \(seed): \(missing.count) records never reached the collector, from \(missing.first.map(String.init) ?? "-") \
            to \(missing.last.map(String.init) ?? "-") (\(syncs) syncs, \(kills) killed, \(freezes) freezes, \(restarts) restarts)
            """)
        let stat = try SpoolBinary.run(["stat", log])
        #expect(stat.stdout.contains("sync  offset \(count)  lag 0 records"), "\(stat.stdout)")
        // Not vacuous: the limit did refuse requests (nginx logs each body it refused).
        if let nginx {
            let errors = (try? String(contentsOfFile: nginx.directory + "/nginx-error.log", encoding: .utf8)) ?? ""
            #expect(errors.contains("client intended to send too large body"), "nginx refused no request")
        }
    }

    /// The seqs of the collector's `--out` lines (repeats included).
    static func seqs(inOutput path: String) -> [UInt64] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            return (object?["seq"] as? NSNumber)?.uint64Value
        }
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func everyRecordArrivesThroughNginxAnswering413s(seed: UInt64) throws {
        try run(seed: seed, throughNginx: true)
    }

    @Test(arguments: [UInt64(4), 5])
    func everyRecordArrivesFromACollectorAnswering413s(seed: UInt64) throws {
        try run(seed: seed, throughNginx: false)
    }
}
