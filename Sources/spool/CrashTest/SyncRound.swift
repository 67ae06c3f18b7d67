import Foundation
import Spool
import SpoolCollector

/// The sync half of `spool crash-test --with-sync`: a reference collector in this process
/// (it outlives every child), and `spool sync` children killed with SIGKILL mid-upload.
struct SyncRound {
    let collector: Collector
    let url: String
    /// `spool sync --concurrency` for every child, or nil for a random pick per child among 1,
    /// 4 and adaptive.
    let concurrency: String?

    /// Starts the collector on a free port of 127.0.0.1.
    static func start(concurrency: String?) throws -> SyncRound {
        let collector = Collector(configuration: CollectorConfiguration())
        let port = try runBlocking { try await collector.start() }
        return SyncRound(collector: collector, url: "http://127.0.0.1:\(port)/batch", concurrency: concurrency)
    }

    /// Whether every child keeps strict order (one request in flight), so the collector must
    /// receive seqs in order; with more, batches arrive in any order.
    var ordered: Bool { concurrency == "1" }

    func stop() {
        _ = try? runBlocking { [collector] in await collector.stop() }
    }

    /// Starts `spool sync` on consumer `up`, and kills it at a random moment once it has begun
    /// uploading (or lets it finish, when `kill` is false). Returns a problem, if any.
    /// - Returns: the problems, and whether the child was still running when it was killed.
    func run(executable: String, directory: String, generator: inout SplitMix64, maxRunMillis: Int, kill: Bool) throws -> (problems: [String], killed: Bool) {
        var arguments = ["sync", directory, "--url", url, "--consumer", "up", "--create", "--batch-count", "\(1 + generator.next() % 120)",
                         "--concurrency", concurrency ?? ["1", "4", "adaptive"][Int(generator.next() % 3)]]
        // Half the rounds drain and exit (--once); the others run as a daemon that sends at
        // launch what the previous run left, then idles.
        if !kill {
            // The final drain must not give up on a slow or busy machine: short timeouts, many retries.
            arguments += ["--once", "--retries", "50", "--timeout", "5"]
        } else if generator.next() % 2 == 0 {
            arguments += ["--once", "--retries", "3"]
        } else {
            arguments += ["--interval", "0"]
        }
        let requestsBefore = collector.stats.requests
        let child = ChildProcess(executable: executable, arguments: arguments)
        try child.start()
        if kill {
            let startedAt = Date()
            while child.process.isRunning, collector.stats.requests == requestsBefore, Date().timeIntervalSince(startedAt) < 5 {
                Thread.sleep(forTimeInterval: 0.001)
            }
            Thread.sleep(forTimeInterval: Double(generator.next() % UInt64(maxRunMillis)) / 1000)
            child.kill()
        } else {
            child.closeInput()
        }
        let (status, reason, _) = child.finish()
        if reason == .exit, status != 0 { return (["spool sync exited with status \(status)"], false) }
        return ([], reason == .uncaughtSignal)
    }

    /// Starts `spool sync --sidecar` on consumer `up`, beside a running appender: it sends as
    /// records are written (a flush every 10 records or 50 ms) until it is killed.
    func startSidecar(executable: String, directory: String, generator: inout SplitMix64) throws -> ChildProcess {
        let arguments = ["sync", directory, "--sidecar", "--url", url, "--consumer", "up", "--create",
                         "--batch-count", "\(1 + generator.next() % 120)", "--count", "10", "--interval", "0.05",
                         "--concurrency", concurrency ?? ["1", "4", "adaptive"][Int(generator.next() % 3)]]
        let child = ChildProcess(executable: executable, arguments: arguments)
        try child.start()
        child.closeInput()
        return child
    }

    /// One line on what the collector saw, so a run shows that kills landed mid-upload.
    func summary(killed: Int, rounds: Int) -> String {
        let stats = collector.stats
        return "sync: \(killed) of \(rounds) sync children killed while running; the collector answered \(stats.requests) requests "
            + "and holds \(stats.received) records (\(stats.duplicates) duplicates dropped)"
    }

    /// Checks the collector against the log: what it holds was appended (byte for byte, and in
    /// seq order of first arrival when ``ordered``), and the committed offset of `up` never passes a record the
    /// collector has not acknowledged. With `drained`, the collector holds every stored record.
    /// `appended` gives the line sent for a seq; `stored` what the log holds now (retention
    /// deletes segments once `up` has passed them, so the collector may hold more).
    /// Every `acknowledged` record that retention deleted (below the log's first seq) must be
    /// at the collector: retention never deletes what consumer `up` has not committed.
    func check(log: EventLog, appended: (UInt64) -> [UInt8]?, stored: [UInt64: [UInt8]], acknowledged: Set<UInt64>,
               previousCommitted: inout UInt64, drained: Bool) throws -> [String] {
        var problems = [String]()
        let committed = log.consumerNames.contains("up") ? try log.consumer(named: "up").committed : log.firstSeq
        if committed < previousCommitted { problems.append("the committed offset went back from \(previousCommitted) to \(committed)") }
        previousCommitted = committed
        let logID = log.id.description
        let received = collector.records().filter { $0.logID == logID }
        var receivedSeqs = Set<UInt64>()
        var last: UInt64?
        for record in received {
            if ordered, let last, record.seq <= last { problems.append("the collector received seq \(record.seq) after \(last): out of order") }
            last = record.seq
            if !receivedSeqs.insert(record.seq).inserted { problems.append("the collector holds seq \(record.seq) twice") }
            guard let payload = appended(record.seq) else {
                problems.append("the collector holds seq \(record.seq), which was never appended")
                continue
            }
            if record.data.map({ Array($0.utf8) }) != payload { problems.append("the collector's seq \(record.seq) differs from what was appended") }
            if problems.count > 20 { return problems }
        }
        let mustHave = drained ? stored.keys.sorted() : stored.keys.filter { $0 < committed }.sorted()
        for seq in mustHave where !receivedSeqs.contains(seq) {
            problems.append(drained
                ? "after a full drain the collector lacks seq \(seq)"
                : "the committed offset \(committed) passes seq \(seq), which the collector never acknowledged")
            if problems.count > 20 { break }
        }
        let firstSeq = log.firstSeq
        for seq in acknowledged where seq < firstSeq && !receivedSeqs.contains(seq) {
            problems.append("retention deleted acknowledged record \(seq), which the collector never received")
            if problems.count > 20 { break }
        }
        if drained, committed != log.nextSeq { problems.append("after a full drain the offset is \(committed), not \(log.nextSeq)") }
        return problems
    }
}
