/// A write observer's registration, returned by ``EventLog/observeWrites(_:)``.
///
/// ``cancel()`` unregisters the handler; it is safe to call more than once and from any
/// thread. Handlers are called outside the log's lock, so one call for a write that was
/// already being announced may still arrive after `cancel()` returns; none for a later write.
public struct WriteObservation: Sendable {
    private let onCancel: @Sendable () -> Void

    /// Makes a registration whose ``cancel()`` runs `onCancel` (for ``LogConsumer`` conformers
    /// that keep their own observers, such as an in-memory consumer in tests).
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = onCancel
    }

    /// Stops the handler from being called for later writes.
    public func cancel() { onCancel() }
}
