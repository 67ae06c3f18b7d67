extension SyncStateMachine {
    /// After a 413: the largest batch (records, encoded body bytes) the worker sends, below the
    /// configuration's, until accepted batches let it grow back. Pure.
    struct BatchCeiling: Sendable {
        /// Accepted batches between two raises of a ceiling.
        static let growthBatches = 32

        private(set) var ceiling: (count: Int, bytes: Int)?
        /// Batches accepted since the ceiling last changed.
        private var acceptedSinceChange = 0

        /// The most records and encoded body bytes of one batch: `configured`, or less under a ceiling.
        func limits(_ configured: (count: Int, bytes: Int)) -> (count: Int, bytes: Int) {
            guard let ceiling else { return configured }
            return (min(ceiling.count, configured.count), min(ceiling.bytes, configured.bytes))
        }

        /// A 413: batches from now on hold at most half of the refused one, in records and in
        /// encoded body bytes (what `maxBatchBytes` limits), so later batches do not walk the
        /// same chain of 413s again.
        mutating func lower(below batch: SyncBatch, configured: (count: Int, bytes: Int)) {
            let (count, bytes) = limits(configured)
            ceiling = (min(count, max(1, batch.records.count / 2)), min(bytes, max(1, batch.bodyBytes / 2)))
            acceptedSinceChange = 0
        }

        /// A batch was accepted: every ``growthBatches`` of them, the ceiling grows by a
        /// quarter, until it reaches `configured`.
        mutating func accepted(configured: (count: Int, bytes: Int)) {
            acceptedSinceChange += 1
            guard let current = ceiling, acceptedSinceChange >= Self.growthBatches else { return }
            acceptedSinceChange = 0
            let count = current.count + max(1, current.count / 4)
            let bytes = current.bytes + max(1, current.bytes / 4)
            ceiling = count >= configured.count && bytes >= configured.bytes ? nil : (count, bytes)
        }
    }
}
