import Synchronization

/// The bytes one request's body holds of the collector's body budget
/// (``Collector/bodyBudget``, shared through ``Collector/bodyBytesHeld``): reserved as the body
/// arrives, never for the length it declares, given back when the request ends.
///
/// Thread safety: `Sendable`; its reader and the handler that ends the request share it.
final class HeldBytes: Sendable {
    private let collector: Collector
    private let reserved = Mutex(0)

    init(_ collector: Collector) { self.collector = collector }

    /// Makes this request hold at least `bytes` of the budget.
    ///
    /// - Returns: `false`, holding what it held, when the budget has no room for the rest.
    func reserve(upTo bytes: Int) -> Bool {
        reserved.withLock { reserved in
            guard bytes > reserved else { return true }
            let more = bytes - reserved
            let budget = collector.bodyBudget
            let taken = collector.bodyBytesHeld.withLock { held in
                guard held <= budget - more else { return false }
                held += more
                return true
            }
            if taken { reserved = bytes }
            return taken
        }
    }

    /// Gives back everything this request holds.
    func releaseAll() {
        let bytes = reserved.withLock { reserved in
            defer { reserved = 0 }
            return reserved
        }
        collector.bodyBytesHeld.withLock { $0 -= bytes }
    }
}
