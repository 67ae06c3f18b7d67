import Synchronization

/// A flag one thread raises and another polls without taking a lock: what stops a cold
/// rewrite's compression (``ZstdCompressor/interruption``). Raised once, never lowered.
///
/// Thread-safety: any thread may raise it or read it.
final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)

    /// A flag not raised.
    init() {}

    /// Asks the poller to stop.
    func raise() { raised.store(true, ordering: .releasing) }

    /// Whether ``raise()`` was called.
    var isRaised: Bool { raised.load(ordering: .acquiring) }
}
