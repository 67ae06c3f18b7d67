import Foundation
import Spool

/// Kills real `spool append --ack` processes with SIGKILL at seeded random moments and checks,
/// after every round, that the log keeps its promises:
/// - every record acknowledged at `written` or `synced` is present, byte for byte, at its seq;
/// - seqs are dense from the first stored record and never reused;
/// - nothing is returned that was not appended (every record matches the line sent for its seq);
/// - a full verify finds no corruption (a torn tail that recovery cut is fine).
///
/// With `withSync`, each round also runs `spool sync` against a collector in this process and
/// kills it mid-upload (see ``SyncRound``); with `corrupt`, each round damages a copy of the log
/// and reads it back (see ``CorruptionRound``).
struct CrashTester {
    var executable: String
    var directory: String
    var seed: UInt64
    var rounds: Int
    var durability: Durability
    /// The longest a child runs before it is killed, in milliseconds.
    var maxRunMillis: Int = 150
    /// Also kill `spool sync` children uploading to a reference collector.
    var withSync = false
    /// Their `--concurrency`, or nil for a random pick per child (see ``SyncRound``).
    var syncConcurrency: String?
    /// Run each round's sync child as a sidecar (`spool sync --sidecar`) beside the appending
    /// child, each killed at its own random moment, instead of after it.
    var sidecar = false
    /// Also damage a copy of the log after each round and read it back.
    var corrupt = false
    /// The appending child's `--linger` in milliseconds, or nil for `spool append`'s default.
    var linger: Int?

    struct Failure: CustomStringConvertible {
        var round: Int
        var seed: UInt64
        var message: String
        var description: String { "FAIL seed=\(seed) round=\(round): \(message)" }
    }

    /// The line appended as record `index` of `round`: deterministic, so it can be recomputed.
    /// Compact JSON, so a collector embeds it as is and its `data` can be compared byte for byte.
    static func line(seed: UInt64, round: Int, index: Int) -> [UInt8] {
        var generator = SplitMix64(seed: seed ^ (UInt64(round) << 32) ^ UInt64(index))
        let length = 8 + Int(generator.next() % 300)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        let text = (0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }
        return Array("{\"r\":\(round),\"i\":\(index),\"p\":\"".utf8) + text + Array("\"}".utf8)
    }

    /// Runs every round; returns the failures (empty when every invariant held).
    func run(progress: (Int, [Failure]) -> Void) throws -> [Failure] {
        signal(SIGPIPE, SIG_IGN)
        var generator = SplitMix64(seed: seed)
        var failures = [Failure]()
        /// Per round: the seq of its first line and the lines sent.
        var rounds = [(base: UInt64, lines: [[UInt8]])]()
        var acknowledged = Set<UInt64>()
        let sync = withSync ? try SyncRound.start(concurrency: syncConcurrency) : nil
        defer { sync?.stop() }
        var committed: UInt64 = 0
        var syncKills = 0
        var appendArguments = ["append", directory, "--ack", "--durability", durability.rawValue]
        // Small segments, so damage can hit sealed segments as well as the active one, and a
        // sidecar's commits let the appender's retention delete segments while both run.
        if corrupt || sidecar { appendArguments += ["--segment-size", "\(64 * 1024)"] }
        if let linger { appendArguments += ["--linger", "\(linger)"] }
        for round in 0..<self.rounds {
            let base = try withTesterLog(directory) { $0.nextSeq }
            let child = ChildProcess(executable: executable, arguments: appendArguments)
            try child.start()
            // Far past any round's run (5 s to the first acknowledgement, then maxRunMillis).
            child.startWatchdog(seconds: 60 + Double(maxRunMillis) / 1000)
            // The kill comes at a random moment after the child's first acknowledgement, so it
            // lands while records are being appended, not while the process starts.
            let killAfter = Double(Int(generator.next() % UInt64(maxRunMillis))) / 1000
            let startedAt = Date()
            var deadline: Date?
            var sent = [[UInt8]]()
            // With `sidecar`: a sync child beside the appender, started once the log exists and
            // killed at a moment of its own (before, with or after the appender's).
            var sidecarChild: ChildProcess?
            var sidecarKill: Date?
            while deadline.map({ Date() < $0 }) ?? true {
                if deadline == nil, child.lineCount > 0 || Date().timeIntervalSince(startedAt) > 5 {
                    deadline = Date().addingTimeInterval(killAfter)
                    if sidecar, let sync {
                        sidecarChild = try sync.startSidecar(executable: executable, directory: directory, generator: &generator)
                        sidecarKill = Date().addingTimeInterval(Double(generator.next() % UInt64(2 * maxRunMillis)) / 1000)
                    }
                }
                if let kill = sidecarKill, Date() >= kill, let running = sidecarChild {
                    running.kill()
                    sidecarKill = nil
                }
                var chunk = Data()
                for _ in 0..<Int(1 + generator.next() % 64) {
                    let line = Self.line(seed: seed, round: round, index: sent.count)
                    chunk.append(contentsOf: line)
                    chunk.append(0x0A)
                    sent.append(line)
                }
                if !child.write(chunk) { break }
            }
            child.kill()
            let (_, reason, lines) = child.finish()
            var sidecarProblems = [String]()
            if let running = sidecarChild {
                running.kill()
                let (status, reason, _) = running.finish()
                if reason == .uncaughtSignal { syncKills += 1 } else { sidecarProblems.append("spool sync --sidecar exited with status \(status) before it was killed") }
            }
            rounds.append((base, sent))
            var roundFailures = [String]()
            if reason != .uncaughtSignal { roundFailures.append("the child exited by itself before it was killed") }
            if child.hung { roundFailures.append("the child stopped taking input (hung) and was killed by the watchdog") }
            for line in lines {
                guard let seq = UInt64(line) else { roundFailures.append("unexpected output line \"\(line.prefix(40))\""); continue }
                acknowledged.insert(seq)
            }
            let (problems, stored) = try check(rounds: rounds, acknowledged: acknowledged)
            roundFailures += problems
            if let sync {
                if sidecar {
                    roundFailures += sidecarProblems.map { "sync: \($0)" }
                } else {
                    let (problems, killed) = try sync.run(executable: executable, directory: directory, generator: &generator,
                                                          maxRunMillis: maxRunMillis, kill: true)
                    roundFailures += problems.map { "sync: \($0)" }
                    if killed { syncKills += 1 }
                }
                roundFailures += try withTesterLog(directory) {
                    try sync.check(log: $0, appended: { Self.appended($0, rounds: rounds) }, stored: stored,
                                   acknowledged: acknowledged, previousCommitted: &committed, drained: false)
                }.map { "sync: \($0)" }
            }
            if corrupt {
                let floor = try withTesterLog(directory) { log in
                    try log.consumerNames.map { try log.consumer(named: $0).committed }.min() ?? 0
                }
                roundFailures += try CorruptionRound.run(executable: executable, directory: directory, stored: stored, floor: floor,
                                                         generator: &generator).map { "corrupt: \($0)" }
            }
            failures += roundFailures.map { Failure(round: round, seed: seed, message: $0) }
            progress(round, failures)
        }
        if let sync {
            // A last sync that is not killed must deliver every stored record.
            var problems = try sync.run(executable: executable, directory: directory, generator: &generator,
                                        maxRunMillis: maxRunMillis, kill: false).problems
            let stored = try check(rounds: rounds, acknowledged: acknowledged).stored
            problems += try withTesterLog(directory) {
                try sync.check(log: $0, appended: { Self.appended($0, rounds: rounds) }, stored: stored,
                               acknowledged: acknowledged, previousCommitted: &committed, drained: true)
            }
            failures += problems.map { Failure(round: self.rounds, seed: seed, message: "final sync: \($0)") }
            print(sync.summary(killed: syncKills, rounds: self.rounds))
            progress(self.rounds, failures)
        }
        return failures
    }

    /// Reopens the log and checks every invariant against what was sent and acknowledged.
    /// Returns the problems and every stored record's payload by seq.
    private func check(rounds: [(base: UInt64, lines: [[UInt8]])], acknowledged: Set<UInt64>) throws -> (problems: [String], stored: [UInt64: [UInt8]]) {
        var problems = [String]()
        var stored = [UInt64: [UInt8]]()
        try withTesterLog(directory) { log in
            var expectedSeq = log.firstSeq
            let reader = log.reader()
            while let item = try reader.next() {
                switch item {
                case .notice(let notice):
                    problems.append("reader reported \(notice)")
                case .record(let record):
                    if record.seq != expectedSeq { problems.append("seq \(record.seq) follows \(expectedSeq - 1): not dense") }
                    expectedSeq = record.seq + 1
                    stored[record.seq] = record.payload
                    guard let line = Self.appended(record.seq, rounds: rounds) else {
                        problems.append("record \(record.seq) was never appended")
                        continue
                    }
                    if record.payload != line { problems.append("record \(record.seq) differs from what was appended") }
                }
            }
            // Retention deletes what consumer `up` (with --with-sync) has passed: below firstSeq.
            for seq in acknowledged where seq >= log.firstSeq && stored[seq] == nil {
                problems.append("acknowledged record \(seq) is missing")
                if problems.count > 20 { break }
            }
            // The pass above checked every block's checksums and framing, as verify does.
        }
        return (problems, stored)
    }
}

extension CrashTester {
    /// The line sent for `seq`: the latest round that started at or below it (a round starts at
    /// the log's next seq, so a seq a round never got to may be reused by the next one).
    static func appended(_ seq: UInt64, rounds: [(base: UInt64, lines: [[UInt8]])]) -> [UInt8]? {
        guard let round = rounds.lastIndex(where: { $0.base <= seq }), seq - rounds[round].base < UInt64(rounds[round].lines.count) else {
            return nil
        }
        return rounds[round].lines[Int(seq - rounds[round].base)]
    }
}

/// Opens the log in `directory` for the tester's own checks, runs `body`, and closes it; its
/// log lines go to standard error at warning level, never among the tester's report.
func withTesterLog<T>(_ directory: String, _ body: (EventLog) throws -> T) throws -> T {
    try withEventLog(directory: directory, logger: commandLogger(), body)
}
