import ArgumentParser
import Foundation
import Spool

/// `spool crash-test`: SIGKILL real writers at random moments and check every invariant.
struct CrashTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "crash-test",
        abstract: "Kill real spool processes with SIGKILL at random moments and check that nothing acknowledged is lost.",
        discussion: """
            Each round starts `spool append --ack` on the log, feeds it lines, kills it with SIGKILL \
            after a seeded random delay, reopens the log and checks: every acknowledged record is \
            present byte for byte at its seq; seqs are dense and never reused; nothing is returned \
            that was not appended; verify finds no corruption. Prints one line per failed invariant \
            with the seed and round that reproduce it, and ends with "N passed, N failed".

            --with-sync also runs a reference collector in this process and, after each append \
            round, a `spool sync` child (consumer `up`) killed mid-upload; it checks that the \
            committed offset never passes what the collector acknowledged, and that the collector \
            holds, de-duplicated, exactly the stored records byte for byte (in order when \
            --sync-concurrency is 1); a last, unkilled sync must deliver everything. Each sync child \
            gets --concurrency 1, 4 or adaptive at random unless --sync-concurrency says which. With \
            --sidecar the sync child runs beside the appending child (`spool sync --sidecar`, never \
            taking the writer's lock) and each is killed at its own random moment. --corrupt damages a copy of the log after each \
            round (bit flips, zeroed ranges, cut headers, garbage, empty and foreign files) and \
            checks that `spool dump` and `spool verify` never crash or hang, report exactly the \
            damaged seq range, and still read everything else.
            """)

    @Option(help: "The log directory: new, empty, or made by an earlier crash-test, whose logs are replaced (default: a new temporary directory, removed afterwards).")
    var dir: String?

    @Option(help: "Kill rounds to run.")
    var rounds: Int = 100

    @Option(help: "The seed of every random choice; a failure names the seed that reproduces it.")
    var seed: UInt64 = UInt64(Date().timeIntervalSince1970)

    @Option(help: "The acknowledgement level under test: written or synced (or all).")
    var durability: String = "all"

    @Option(help: "The longest a child runs before it is killed, in milliseconds.")
    var maxRunMs: Int = 150

    @Flag(help: "Also kill `spool sync` children uploading to a reference collector, and check the collector.")
    var withSync = false

    @Option(name: .customLong("sync-concurrency"), help: "With --with-sync: every sync child's --concurrency (default: 1, 4 or adaptive at random per child).")
    var syncConcurrency: String?

    @Flag(help: "With --with-sync: run each sync child as a sidecar (spool sync --sidecar) beside the appending child, killed independently.")
    var sidecar = false

    @Flag(help: "Also damage a copy of the log after each round and check how it reads.")
    var corrupt = false

    @Option(help: ArgumentHelp("The appending child's --linger (default: spool append's own).", valueName: "ms"))
    var linger: Int?

    @OptionGroup var progress: ProgressOption

    func validate() throws {
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1") }
        guard ["written", "synced", "all"].contains(durability) else { throw ValidationError("--durability is written, synced or all") }
        if sidecar && !withSync { throw ValidationError("--sidecar needs --with-sync") }
        if let syncConcurrency, ConcurrencySetting(argument: syncConcurrency) == nil {
            throw ValidationError("--sync-concurrency is a number or 'adaptive', not '\(syncConcurrency)'")
        }
        guard maxRunMs >= 1 else { throw ValidationError("--max-run-ms must be at least 1") }
        if let linger, !(0...60_000).contains(linger) { throw ValidationError("--linger must be between 0 and 60000 milliseconds") }
    }

    func run() throws {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().path
        let levels: [Durability] = durability == "all" ? [.written, .synced] : [Durability(rawValue: durability)!]
        var passed = 0
        var failed = 0
        let modes = (withSync ? (sidecar ? ", with a sidecar sync" : ", with sync") : "") + (corrupt ? ", with corruption" : "")
        try Output.write("crash-test: seed \(seed), \(rounds) rounds per level, levels \(levels.map(\.rawValue).joined(separator: ", "))\(modes)\n")
        if let dir { try claimScratchDirectory(dir, for: "crash-test") }
        let line = progress.line("crash-test", unit: "rounds", total: UInt64(rounds * levels.count))
        for (index, level) in levels.enumerated() {
            // Without --dir, a fresh private directory (mkdtemp), not a name another user could make first.
            let root = try dir ?? makePrivateDirectory(prefix: "spool-crash-\(level.rawValue)")
            let directory = "\(root)/\(level.rawValue)"
            try? FileManager.default.removeItem(atPath: directory)
            defer { if dir == nil { try? FileManager.default.removeItem(atPath: root) } }
            let tester = CrashTester(executable: executable, directory: directory, seed: seed, rounds: rounds,
                                     durability: level, maxRunMillis: maxRunMs, withSync: withSync, syncConcurrency: syncConcurrency, sidecar: sidecar, corrupt: corrupt, linger: linger)
            var reported = 0
            let failures = try tester.run { round, failures in
                if failures.count > reported { line.clear() }
                for failure in failures[reported...] { print(failure) }
                reported = failures.count
                line.update(UInt64(index * rounds + min(round + 1, rounds)))
            }
            line.clear()
            // The final sync's failures (round == rounds) count as one more failure.
            let failedRounds = Set(failures.map(\.round).filter { $0 < rounds }).count
            passed += rounds - failedRounds
            failed += Set(failures.map(\.round)).count
            let (stored, report) = try withTesterLog(directory) { ($0.nextSeq, try $0.verify()) }
            if !report.isClean {
                try Output.write("FAIL seed=\(seed) final verify: \(report.corrupt)\n")
                failed += 1
            }
            try Output.write("\(level.rawValue): \(rounds - failedRounds) rounds passed, \(failedRounds) failed; \(stored) records in the log\n")
        }
        try Output.write("\(passed) passed, \(failed) failed\n")
        if failed > 0 { throw ExitCode(1) }
    }
}
