import Testing
@testable import Spool

/// Once warm, the append path allocates nothing per block: a written block's buffer is emptied
/// in place and filled again by a later block, and the waiter list keeps its capacity.
@Suite struct BufferReuseTests {
    /// The address of a block buffer's storage, to tell one allocation from another.
    private static func address(_ bytes: [UInt8]) -> UInt {
        bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func aWrittenBlocksBufferIsRecycledNotReallocated() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        // Warm: the first block's buffer grows from empty; every later block has one reserved.
        try await log.append(payload(0), durability: .written)
        for round in 1..<6 {
            // The block the next append fills, and the buffer it fills.
            let filled = log.lock.withLock { Self.address(log.state.current.raw) }
            try await log.append(payload(round), durability: .written)
            let spares = log.lock.withLock { log.state.spare.map { Self.address($0.raw) } }
            #expect(spares.contains(filled), "round \(round): the written block's buffer went back to the spares")
        }
        #expect(records(try log.readAll()).map(\.payload) == (0..<6).map { payload($0) })
        try log.close()
    }

    @Test func theWaiterListKeepsItsCapacityAcrossGroups() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<32 { group.addTask { try await log.append(payload(i), durability: .written) } }
            try await group.waitForAll()
        }
        let (count, capacity) = log.lock.withLock { (log.state.waiters.count, log.state.waiters.capacity) }
        #expect(count == 0)
        #expect(capacity > 0, "completed waiters are removed in place, not by replacing the list")
        try log.close()
    }
}
