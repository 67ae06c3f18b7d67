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
    /// Releases what the sink holds (files, say); called once by ``SyncWorker/stop()``.
    /// The default does nothing.
    func shutdown() async
}

extension DeadLetterSink {
    /// Does nothing: a sink that holds nothing has nothing to release.
    public func shutdown() async {}
}
