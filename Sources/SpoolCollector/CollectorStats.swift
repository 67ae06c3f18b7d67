/// What a ``Collector`` has seen since it started.
public struct CollectorStats: Sendable, Hashable {
    /// Requests that reached the handler, whatever their outcome (health checks aside).
    public var requests: Int = 0
    /// Requests answered 503 because ``CollectorConfiguration/maxConcurrentRequests`` were
    /// already in flight, or the bodies being read had no room for theirs (counted in
    /// ``requests`` too).
    public var overloaded: Int = 0
    /// Batches answered 200.
    public var acceptedBatches: Int = 0
    /// Unique records recorded.
    public var received: Int = 0
    /// Records that were received again (the same id and the same bytes) and not recorded twice.
    public var duplicates: Int = 0
    /// Records recorded as conflicts (counted in ``received`` too): their id was already
    /// stored with other bytes, so they were stored under an id of their own
    /// (``ReceivedRecord/conflict``, FORMAT.md §11).
    public var conflicts: Int = 0
    /// Logs whose received seqs were forgotten because more than
    /// ``CollectorConfiguration/maxTrackedLogs`` log ids were seen (a batch they re-send is
    /// recorded again, not counted as a duplicate).
    public var forgottenLogs: Int = 0
    /// Batches refused with 4xx because of their headers or body: malformed, too large,
    /// unsupported, or caught by a fault rule (``FaultConfiguration/payloadTooLargeAbove``,
    /// ``FaultConfiguration/poisonMarker``). Injected failures, 429s and resets are not counted here.
    public var rejectedBatches: Int = 0
    /// The records those refused batches said they held (their `Spool-Batch` range; 0 when
    /// that header was missing or invalid).
    public var rejectedRecords: Int = 0
    /// `POST`s answered 401: no valid bearer token (``CollectorConfiguration/authTokenFile``).
    public var unauthorized: Int = 0
    /// Batches answered 503 because the collector's log could not take them or make them
    /// durable (``CollectorConfiguration/logDirectory``).
    public var unstored: Int = 0
    /// Request body bytes read, as sent.
    public var bodyBytes: Int = 0
    /// Body bytes after decompression, for the bodies that were decoded.
    public var decodedBytes: Int = 0
    /// Faults injected, by kind.
    public var faults = FaultCounts()

    public init() {}
}

/// Injected faults, by kind.
public struct FaultCounts: Sendable, Hashable {
    /// Answers with ``FaultConfiguration/failureStatus``.
    public var failures: Int = 0
    /// 429 answers.
    public var rateLimited: Int = 0
    /// Connections closed without an answer.
    public var resets: Int = 0
    /// 413 answers from ``FaultConfiguration/payloadTooLargeAbove``.
    public var payloadTooLarge: Int = 0
    /// 400 answers from ``FaultConfiguration/poisonMarker``.
    public var poisoned: Int = 0

    public init() {}

    /// Every injected fault.
    public var total: Int { failures + rateLimited + resets + payloadTooLarge + poisoned }
}
