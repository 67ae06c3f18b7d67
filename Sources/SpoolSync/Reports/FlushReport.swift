/// What one flush did: the answer of ``SyncWorker/flush(deadline:retries:)``.
public struct FlushReport: Sendable {
    /// Batches the server accepted and whose records were committed.
    public var batches = 0
    /// Records in those batches.
    public var records = 0
    /// Bytes of request body sent for them (after compression).
    public var bytes = 0
    /// Records the server refused that were moved to the dead-letter log and committed past.
    public var deadLettered = 0
    /// Records skipped as damaged (the log could not read them), recorded and committed past
    /// during the flush: lost, never delivered.
    public var damaged = DamageTally()
    /// The failure that ended the flush, if one did. `nil` when the flush ended because nothing
    /// was pending, or at its deadline.
    public var failure: SyncError?
    /// Whether the flush stopped starting requests because its deadline was near.
    public var deadlineReached = false

    /// An empty report: nothing sent, no failure.
    public init() {}

    /// Whether the flush ended without a failure.
    public var succeeded: Bool { failure == nil }
}

/// The outcome of one request, reported by ``SyncWorker/dispatch(deadline:retries:onBatch:)``
/// (Google Analytics' `dispatchWithCompletionHandler` results).
public enum BatchResult: Sendable {
    /// A batch was delivered (or its refused records dead-lettered) and committed; more may remain.
    case good
    /// Nothing is pending: the flush is done.
    case noData
    /// A request or a commit failed.
    case error(SyncError)
    /// Ranges of records the log could not read (damaged bytes) were recorded and are
    /// committed past: lost, never delivered (``SyncConfiguration/DamagePolicy/skip``).
    case damaged([DamagedRange])
}
