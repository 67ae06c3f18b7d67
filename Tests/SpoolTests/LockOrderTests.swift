import Testing
@testable import Spool

/// The debug-build lock-order check (`LockRank`): taking locks in rank order passes, and taking
/// one of a lower rank while holding a higher one traps, in a child process (an exit test).
@Suite struct LockOrderTests {
    @Test func locksTakenInRankOrderPass() {
        let outer = RankedLock(.lifecycle)
        let middle = RankedMutex(.consumerCache, 0)
        let inner = ConditionLock()
        outer.withLock {
            middle.withLock { value in
                inner.withLock { value += 1 }
            }
        }
        // Released out of order (the writer releases the log's lock in the middle of a write).
        outer.lock()
        inner.lock()
        outer.unlock()
        inner.unlock()
        // Then taken again from the top.
        outer.withLock { inner.withLock {} }
        #expect(middle.withLock { $0 } == 1)
    }

    #if DEBUG
    @Test func takingALowerRankWhileHoldingAHigherOneTraps() async {
        await #expect(processExitsWith: .failure) {
            let log = ConditionLock()
            let committer = RankedLock(.committer)
            log.withLock { committer.withLock {} }
        }
    }

    @Test func takingTwoLocksOfOneRankTraps() async {
        await #expect(processExitsWith: .failure) {
            let first = RankedLock(.committer)
            let second = RankedLock(.committer)
            first.withLock { second.withLock {} }
        }
    }
    #endif
}
