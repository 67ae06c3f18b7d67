import Dispatch
import Synchronization

extension SyncSimulation {
    /// What a sweep over many seeds found: the totals of the runs that passed, and the lowest
    /// seed that failed, if one did (replay it with `run(seed:trace: true)`).
    package struct Sweep: Sendable {
        package var runs = 0
        package var steps = 0
        package var committed: UInt64 = 0
        package var hedges = 0
        /// Runs that made at least one hedge, runs that recorded a damaged range, and runs that
        /// ended stopped.
        package var hedgedRuns = 0
        package var damagedRuns = 0
        package var stoppedRuns = 0
        package var firstFailure: UInt64?

        mutating func add(_ summary: Summary) {
            runs += 1
            steps += summary.steps
            committed += summary.committed
            hedges += summary.hedges
            if summary.hedges > 0 { hedgedRuns += 1 }
            if summary.damageRecorded > 0 { damagedRuns += 1 }
            if summary.stopped { stoppedRuns += 1 }
        }

        mutating func add(_ other: Sweep) {
            runs += other.runs
            steps += other.steps
            committed += other.committed
            hedges += other.hedges
            hedgedRuns += other.hedgedRuns
            damagedRuns += other.damagedRuns
            stoppedRuns += other.stoppedRuns
            if let failed = other.firstFailure { firstFailure = min(firstFailure ?? failed, failed) }
        }
    }

    /// Runs every seed of `seeds` on `threads` threads (lane `k` takes every `threads`-th seed
    /// from the `k`-th), blocking the calling thread until they end. A run depends on nothing
    /// but its seed, so the sweep finds the same failures on any number of threads; once a seed
    /// fails, seeds above it are not started (the lowest failing one is what to replay).
    package static func sweep(_ seeds: Range<UInt64>, threads: Int) -> Sweep {
        let lanes = max(1, threads)
        let total = Mutex(Sweep())
        DispatchQueue.concurrentPerform(iterations: lanes) { lane in
            var found = Sweep()
            var seed = seeds.lowerBound + UInt64(lane)
            while seed < seeds.upperBound {
                // Seeds above a failure another lane found are not worth starting; those below
                // it still run, so the lowest failing seed is found.
                if let failed = total.withLock({ $0.firstFailure }), failed < seed { break }
                guard case .success(let summary) = run(seed: seed) else {
                    found.firstFailure = seed
                    break
                }
                found.add(summary)
                seed += UInt64(lanes)
            }
            total.withLock { $0.add(found) }
        }
        return total.withLock { $0 }
    }
}
