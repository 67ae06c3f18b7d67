import Spool

/// Where records a server refuses go, so that one poison record cannot block the queue.
///
/// The default is ``DeadLetterLog``, a Spool log next to the consumer.
public protocol DeadLetterSink: Sendable {
    /// Stores `records` durably before returning (the worker commits past them next).
    /// - Parameters:
    ///   - records: the refused records, in seq order, as read from the log.
    ///   - error: the refusal (status and server message, never payloads).
    func store(_ records: [Record], refusedWith error: SyncError) async throws
    /// Stores durably, before returning, that the worker skipped `ranges` of records its log
    /// could not read (the worker commits past them next). The default stores nothing: the
    /// worker still logs each range at error level and counts it.
    /// - Parameters:
    ///   - ranges: the damaged ranges, in seq order.
    ///   - consumer: the consumer that skipped them.
    func recordDamage(_ ranges: [DamagedRange], consumer: String) async throws
    /// Releases what the sink holds (files, say); called once by ``SyncWorker/stop()``.
    /// The default does nothing.
    func shutdown() async
}

extension DeadLetterSink {
    /// Does nothing: a sink that holds nothing has nothing to release.
    public func shutdown() async {}

    /// Stores nothing: a sink of its own records damage only if it implements this.
    public func recordDamage(_ ranges: [DamagedRange], consumer: String) async throws {}
}
