/// A snapshot of a worker's counters since it was made.
public struct SyncStats: Sendable {
    /// Requests the server accepted and the worker committed.
    public var batches = 0
    /// Records in those requests.
    public var records = 0
    /// Bytes of request body in those requests (after compression).
    public var bytes = 0
    /// Requests sent, whatever their answer. More than `batches` when requests failed, were
    /// split, or were sent again (a batch the server accepted after one that failed is sent
    /// again with the retry: the offset never passes the failed one), and requests abandoned
    /// in flight behind a failure, and hedges (``hedges``).
    public var requests = 0
    /// Second copies of a request sent while the first was still out (hedged requests: the
    /// batch holding the commit back had been out longer than most round trips; see
    /// ``SyncConfiguration/hedging``). Counted in ``requests`` too; at most 5% of them.
    public var hedges = 0
    /// How many requests may be in flight now (see ``SyncConfiguration/concurrency``).
    public var concurrency = 1
    /// The highest number of requests in flight the concurrency has allowed.
    public var peakConcurrency = 1
    /// How many times the adaptive concurrency lowered ``concurrency`` because the server
    /// showed strain (overload answers, stalled requests, rising round trips); 0 for a fixed
    /// concurrency.
    public var concurrencyDecreases = 0
    /// The most requests actually in flight at once.
    public var peakInFlight = 0
    /// How many requests the destination said, in its last answer, it takes at once
    /// (``SyncSink/declaredCapacity``: a Spool collector's `Spool-Max-Concurrent-Requests`);
    /// nil when it says nothing. While it says so, the adaptive concurrency grows on answers
    /// that waited in line, bounded by the destination's refusals instead.
    public var declaredCapacity: Int?
    /// Failed requests whose batch was sent again (after the backoff). A failure that ended a
    /// flush with no retry left is counted in ``failures`` only.
    public var retries = 0
    /// Batches split in two after a 413 or a refusal.
    public var splits = 0
    /// Failures by kind: one per failed request, commit, read or dead-letter write.
    public var failures: [SyncError.Code: Int] = [:]
    /// Records moved to the dead-letter log (or skipped, with dead-lettering disabled).
    public var deadLettered = 0
    /// Records skipped because the log could not read them (damaged bytes), recorded and
    /// committed past (see ``SyncConfiguration/onDamage``): lost, never delivered.
    public var damaged = DamageTally()
    /// The consumer's committed offset: the next record to deliver.
    public var committed: UInt64 = 0
    /// Records written and not yet committed, as far as the worker knows.
    public var pending: UInt64 = 0
    /// The last failure, if any.
    public var lastError: SyncError?
    /// The refusal that stopped the worker for good (``SyncError/Code/destinationRefused``:
    /// credentials, a missing topic or table), if one did; `nil` while it runs.
    public var fatalError: SyncError?

    /// All counters at zero.
    public init() {}
}
