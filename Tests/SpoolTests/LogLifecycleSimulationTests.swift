import Foundation
import Testing
@testable import Spool

/// The log's state machine under the lifecycle simulator (`LogLifecycleSimulation`): thousands
/// of seeded runs in CI, each checking every invariant after every step. `SPOOL_LOG_SIMULATION_SEEDS`
/// runs more (or fewer); `SPOOL_LOG_SIMULATION_SEED` replays one.
@Suite struct LogLifecycleSimulationTests {
    static let steps = 400

    @Test func everySeedKeepsTheLogsInvariants() throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds: ClosedRange<UInt64>
        if let one = environment["SPOOL_LOG_SIMULATION_SEED"].flatMap(UInt64.init) {
            seeds = one...one
        } else {
            let count = environment["SPOOL_LOG_SIMULATION_SEEDS"].flatMap(UInt64.init) ?? 3_000
            seeds = 1...count
        }
        var replaced = 0
        var abandoned = 0
        var bursts = 0
        var streams = 0
        for seed in seeds {
            var simulation = LogLifecycleSimulation(seed: seed)
            do {
                try simulation.run(steps: Self.steps)
            } catch {
                Issue.record("\(error)")
                return
            }
            replaced += simulation.rewritesReplaced
            abandoned += simulation.rewritesAbandoned
            bursts += simulation.gatheringBursts
            streams += simulation.gatheringStreams
        }
        // Cold rewrites took part: some replaced their segment, some were stopped.
        if seeds.count >= 1000 { #expect(replaced > 0 && abandoned > 0, "replaced \(replaced), abandoned \(abandoned)") }
        // Gatherings took part, and taught the limit both ways.
        if seeds.count >= 1000 { #expect(bursts > 0 && streams > 0, "bursts \(bursts), streams \(streams)") }
    }

    /// One seed's run is a function of its seed: two runs of it agree step for step.
    @Test func aSeedReplaysExactly() throws {
        var first = LogLifecycleSimulation(seed: 42)
        var second = LogLifecycleSimulation(seed: 42)
        try first.run(steps: Self.steps)
        try second.run(steps: Self.steps)
        #expect(first.fingerprint == second.fingerprint)
        var other = LogLifecycleSimulation(seed: 43)
        try other.run(steps: Self.steps)
        #expect(first.fingerprint != other.fingerprint)
    }
}
