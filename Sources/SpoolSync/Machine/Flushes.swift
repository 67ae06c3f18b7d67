extension SyncStateMachine {
    /// A flush caller waiting for the drain.
    struct Waiter: Sendable {
        var id: Int
        var deadline: Duration?
        /// The retries a batch may have while this flush waits: it ends with the failure once
        /// a batch's requests failed more often (``SyncBatch/failures``), whatever path
        /// retried them.
        var retries: Int
        /// The offset this flush waits for, if it does not wait for the end of the log.
        var through: UInt64?
        var report = FlushReport()
    }

    /// The flush callers waiting, in the order they came, each with its report so far. Pure.
    struct Flushes: Sendable {
        private(set) var waiting: [Waiter] = []

        var isEmpty: Bool { waiting.isEmpty }
        var ids: [Int] { waiting.map(\.id) }

        mutating func add(_ waiter: Waiter) {
            waiting.append(waiter)
        }

        /// Removes the flush `id`, if it waits.
        mutating func remove(id: Int) -> Waiter? {
            guard let index = waiting.firstIndex(where: { $0.id == id }) else { return nil }
            return waiting.remove(at: index)
        }

        /// Removes the flushes `ending` picks.
        /// - Returns: them, in the order they came.
        mutating func end(where ending: (Waiter) -> Bool) -> [Waiter] {
            let ended = waiting.filter(ending)
            if !ended.isEmpty { waiting.removeAll(where: ending) }
            return ended
        }

        /// Adds what a commit delivered to every waiting flush's report.
        mutating func credit(_ change: (inout FlushReport) -> Void) {
            for index in waiting.indices { change(&waiting[index].report) }
        }

        /// The timeout of a request starting `now`: `limit`, cut to the earliest deadline.
        func timeout(now: Duration, limit: Duration) -> Duration {
            waiting.compactMap(\.deadline).reduce(limit) { min($0, $1 - now) }
        }
    }
}
