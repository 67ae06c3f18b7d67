import Foundation
import SpoolSimulation
import Testing

/// The deterministic simulator of the sync state machine, over thousands of seeds: every
/// interleaving of reads, commits, answers, flushes, pauses, stops, writes and clock jumps the
/// seeds draw keeps the invariants (`SyncSimulation`'s documentation lists them), and every
/// run that ends calm commits the whole log.
///
/// `SPOOL_SIMULATION_SEEDS` sets how many seeds run (2,000 by default, on every core: about
/// 40 s in a debug build on two cores); `swift run -c release spool-simulate --seeds 1000000`
/// runs millions.
@Suite struct SyncSimulationTests {
    static let seeds: UInt64 = ProcessInfo.processInfo.environment["SPOOL_SIMULATION_SEEDS"].flatMap(UInt64.init) ?? 2_000

    @Test func everySeedKeepsTheInvariants() {
        // On every core: a run depends on nothing but its seed, so the sweep finds the same
        // lowest failing seed on any number of threads.
        let sweep = SyncSimulation.sweep(0 ..< Self.seeds, threads: ProcessInfo.processInfo.activeProcessorCount)
        if let seed = sweep.firstFailure {
            // Replayed with its trace, so the report says every step that led there.
            guard case .failure(let failure) = SyncSimulation.run(seed: seed, trace: true) else {
                Issue.record("seed \(seed) failed, then passed when replayed: the simulation is not deterministic")
                return
            }
            Issue.record("\(failure)")
            return
        }
        #expect(sweep.runs == Int(Self.seeds))
        // The runs did work: most drained a log, some stopped (fatal answers, stop).
        #expect(sweep.committed > Self.seeds * 100)
        #expect(sweep.stoppedRuns > 0 && sweep.stoppedRuns < Int(Self.seeds) / 2)
        // Slow answers made hedges in some runs: both copies answered in any order.
        #expect(sweep.hedgedRuns > 0)
        // Damaged records made reads skip ranges in some runs, and the machine recorded them.
        #expect(sweep.damagedRuns > 0)
    }

    @Test func aSeedReplaysExactly() throws {
        for seed: UInt64 in [1, 17, 4_242] {
            let first = try SyncSimulation.run(seed: seed, trace: true).get()
            let second = try SyncSimulation.run(seed: seed, trace: true).get()
            #expect(first.trace == second.trace)
            #expect(first.trace.count == first.steps)
        }
    }
}
