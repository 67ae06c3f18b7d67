import ArgumentParser
import Dispatch
import Foundation
import SpoolSimulation

/// Runs the deterministic simulator of the sync state machine over many seeds, on every core;
/// a failing seed is replayed with its trace.
///
/// ```
/// swift run -c release spool-simulate --seeds 1000000
/// swift run -c release spool-simulate --seed 123456 --trace
/// ```
@main
struct SimulateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "spool-simulate",
        abstract: "Runs the deterministic simulator of Spool's sync state machine over many seeds.",
        discussion: """
            Each seed draws a configuration, a destination (413 limits, poison records, 503s, 429s \
            with Retry-After, timeouts, slow answers, fatal refusals), a log with damaged runs of records, \
            and an interleaving of every \
            event the machine can receive; the invariants are checked after every step. The first \
            failing seed is replayed with its trace, and the exit status is 1.
            """)

    @Option(help: "How many seeds to run.")
    var seeds: UInt64 = 10_000

    @Option(help: "The first seed.")
    var first: UInt64 = 0

    @Option(help: "Run this one seed only (with --trace, print every step).")
    var seed: UInt64?

    @Flag(help: "Print the trace of every step of the seed given with --seed.")
    var trace = false

    @Option(help: "Threads to run seeds on (default: one per core).")
    var threads: Int = ProcessInfo.processInfo.activeProcessorCount

    func validate() throws {
        guard seeds > 0 else { throw ValidationError("--seeds must be at least 1") }
        guard threads > 0 else { throw ValidationError("--threads must be at least 1") }
    }

    func run() throws {
        if let seed {
            switch SyncSimulation.run(seed: seed, trace: trace) {
            case .success(let summary):
                if trace { print(summary.trace.joined(separator: "\n")) }
                print("seed \(seed): passed in \(summary.steps) steps, \(summary.committed) of \(summary.written) records committed, \(summary.requests) requests (\(summary.hedges) hedges)\(summary.stopped ? ", stopped" : "")")
            case .failure(let failure):
                print(failure.description)
                throw ExitCode(1)
            }
            return
        }
        let started = ContinuousClock.now
        let sweep = SyncSimulation.sweep(first ..< first + seeds, threads: threads)
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        if let failed = sweep.firstFailure {
            guard case .failure(let failure) = SyncSimulation.run(seed: failed, trace: true) else {
                print("seed \(failed) failed, but passed when replayed: the simulation is not deterministic (a defect)")
                throw ExitCode(2)
            }
            print(failure.description)
            print("replay: spool-simulate --seed \(failed) --trace")
            throw ExitCode(1)
        }
        print("\(seeds) seeds from \(first) passed: \(sweep.steps) steps (\(sweep.hedges) hedged requests) in \(String(format: "%.1f", seconds)) s, \(Int(Double(seeds) / max(seconds, 1e-9))) seeds/s on \(threads) threads")
    }
}
