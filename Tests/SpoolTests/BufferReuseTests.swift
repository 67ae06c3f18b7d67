import Testing
@testable import Spool

/// Once warm, writing allocates no block buffer: a written block's buffer is emptied in place
/// and filled again by a later block, and the waiter list keeps its storage.
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
            let filled = log.lock.withLock { Self.address(log.state.pending.current.raw) }
            try await log.append(payload(round), durability: .written)
            let spares = log.lock.withLock { log.state.pending.spare.map { Self.address($0.raw) } }
            #expect(spares.contains(filled), "round \(round): the written block's buffer went back to the spares")
        }
        #expect(records(try log.readAll()).map(\.payload) == (0..<6).map { payload($0) })
        try log.close()
    }

    @Test func theWaiterListKeepsItsStorageAcrossGroups() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(directory: dir.path)
        func group(_ round: Int) async throws -> (count: Int, capacity: Int, storage: UInt) {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<32 { group.addTask { try await log.append(payload(round * 32 + i), durability: .written) } }
                try await group.waitForAll()
            }
            return log.lock.withLock {
                (log.state.waiters.count, log.state.waiters.list.capacity,
                 log.state.waiters.list.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) })
            }
        }
        // Warm: the list grows to the largest group it holds.
        for round in 0..<3 { _ = try await group(round) }
        let first = try await group(3)
        let second = try await group(4)
        #expect(first.count == 0 && second.count == 0)
        // Replacing the list would leave it empty with no storage after every group.
        #expect(first.capacity > 0 && second.capacity > 0, "completed waiters are removed in place, not by replacing the list")
        // The same storage, unless this group held more waiters at once than any before.
        #expect(first.storage == second.storage || second.capacity > first.capacity)
        try log.close()
    }
}
