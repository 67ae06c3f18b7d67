/// What a caller waits for: every record below `end` at its level.
struct Wait {
    /// The end (exclusive) of the records waited for.
    var end: UInt64
    /// The record an error names (``SpoolError/seq``): the appended one, for an append that
    /// waits; nil for a wait on a range, whose error names the first record that did not
    /// reach its level.
    var record: UInt64?
}

/// A caller waiting for records to be written or synced.
struct Waiter {
    enum Kind {
        /// Unsafe rather than checked: one allocation less per synced append. The waiter list is
        /// the only owner; every path that removes a waiter resumes it exactly once.
        case async(UnsafeContinuation<Void, any Error>)
        case blocking(id: Int)
    }
    var wait: Wait
    var level: Durability
    var kind: Kind
}

/// The callers waiting for records to reach a level, in arrival order, and what the log owes
/// those whose wait ended: async continuations to resume outside the lock (the ready list),
/// and blocking callers' results, collected by id.
///
/// Part of ``LogState``, guarded by `EventLog.lock`: its fields are read freely and written
/// only by its own operations, which ``LogState`` calls as records are written and synced (it
/// passes the ends; this type knows no other part of the log). Every waiter leaves the list
/// exactly once: made ready, given its blocking result, or failed. A collection of the waiters
/// still waiting, for reading. Pure: no I/O, no clock, no lock of its own.
struct Waiters: RandomAccessCollection {
    /// Callers waiting for records to be written or synced, in arrival order.
    private(set) var list: [Waiter] = []
    /// How many of `list` wait for `.synced` (read on every synced append while gathering).
    private(set) var synced = 0
    /// Waiters whose records reached their level, to be resumed outside the lock.
    private var ready: [UnsafeContinuation<Void, any Error>] = []
    /// Blocking callers' results, by id, until each caller takes its own.
    private var blockingResults: [Int: Result<Void, SpoolError>] = [:]
    /// The id the next blocking waiter gets.
    private var nextBlockingID = 0

    /// The first waiter's position in ``list``.
    var startIndex: Int { list.startIndex }
    /// The position past the last waiter in ``list``.
    var endIndex: Int { list.endIndex }
    /// The waiter at `position` in ``list``.
    subscript(position: Int) -> Waiter { list[position] }

    /// Some async waiter's wait ended and it is not resumed yet (``takeReady(_:)``).
    var hasReady: Bool { !ready.isEmpty }

    /// Adds a waiter at the end of the list.
    mutating func add(_ waiter: Waiter) {
        list.append(waiter)
        if waiter.level == .synced { synced += 1 }
    }

    /// Adds a blocking caller's waiter; returns the id its result is collected by
    /// (``takeBlockingResult(_:)``).
    mutating func addBlocking(_ wait: Wait, level: Durability) -> Int {
        let id = nextBlockingID
        nextBlockingID += 1
        add(Waiter(wait: wait, level: level, kind: .blocking(id: id)))
        return id
    }

    /// The result of blocking waiter `id`, once it has one (taken: asked once).
    mutating func takeBlockingResult(_ id: Int) -> Result<Void, SpoolError>? {
        blockingResults.removeValue(forKey: id)
    }

    /// Moves the async waiters whose records reached their level (below `writtenEnd`, or
    /// `syncedEnd` for `.synced`) to the ready list and records the blocking ones' success; the
    /// others stay, in order. The list keeps its capacity, so the next group's waiters are added
    /// without allocating.
    mutating func completeReached(writtenEnd: UInt64, syncedEnd: UInt64) {
        guard !list.isEmpty else { return }
        var kept = 0
        var keptSynced = 0
        for index in list.indices {
            let waiter = list[index]
            if waiter.wait.end <= (waiter.level == .synced ? syncedEnd : writtenEnd) {
                switch waiter.kind {
                case .async(let continuation): ready.append(continuation)
                case .blocking(let id): blockingResults[id] = .success(())
                }
            } else {
                list[kept] = waiter
                kept += 1
                if waiter.level == .synced { keptSynced += 1 }
            }
        }
        list.removeLast(list.count - kept)
        synced = keptSynced
        checkInvariants()
    }

    /// Swaps the ready continuations with `buffer` (empty, kept for its capacity): the caller
    /// resumes them outside the lock, then hands the emptied buffer back with
    /// ``returnReadyBuffer(_:)``, so no array is allocated per group.
    mutating func takeReady(_ buffer: inout [UnsafeContinuation<Void, any Error>]) {
        swap(&buffer, &ready)
    }

    /// Takes back an emptied buffer from ``takeReady(_:)`` if no waiter became ready meanwhile.
    mutating func returnReadyBuffer(_ buffer: inout [UnsafeContinuation<Void, any Error>]) {
        if ready.isEmpty { swap(&buffer, &ready) }
    }

    /// Completes the waiters whose records reached their level and fails every other one with
    /// `error`, naming in each error the waiter's record, or else the end of its level
    /// (blocking ones get their result; async ones are returned, with the ready ones, to be
    /// resumed by the caller). The list is left empty.
    mutating func failPending(with error: SpoolError, writtenEnd: UInt64, syncedEnd: UInt64)
        -> (ready: [UnsafeContinuation<Void, any Error>], failed: [(UnsafeContinuation<Void, any Error>, SpoolError)]) {
        guard !list.isEmpty else { return ([], []) }
        completeReached(writtenEnd: writtenEnd, syncedEnd: syncedEnd)
        let completed = ready
        ready.removeAll()
        var failed = [(UnsafeContinuation<Void, any Error>, SpoolError)]()
        for waiter in list {
            var error = error
            error.seq = waiter.wait.record ?? (waiter.level == .synced ? syncedEnd : writtenEnd)
            switch waiter.kind {
            case .async(let continuation): failed.append((continuation, error))
            case .blocking(let id): blockingResults[id] = .failure(error)
            }
        }
        list.removeAll(keepingCapacity: true)
        synced = 0
        return (completed, failed)
    }

    /// Debug builds: `synced` counts the synced waiters of the list. After the operations that
    /// walk the whole list anyway (never per append).
    private func checkInvariants() {
        assert(synced == list.reduce(0) { $0 + ($1.level == .synced ? 1 : 0) }, "synced counts the synced waiters")
    }
}
