import Synchronization

/// Carries "the log wrote up to N" from the writer thread to the worker, coalesced: however
/// many writes happen, at most one delivery task is pending, and it delivers the latest end.
/// Cheap and non-blocking on the writer's side (one lock, at most one `Task` per delivery).
final class WriteRelay: Sendable {
    private struct State {
        var end: UInt64 = 0
        var scheduled = false
    }

    private let state = Mutex(State())
    private let deliver: @Sendable (UInt64) async -> Void

    init(deliver: @escaping @Sendable (UInt64) async -> Void) {
        self.deliver = deliver
    }

    /// Called by the log with the offset just past the last written record.
    func notify(_ end: UInt64) {
        let schedule = state.withLock { state -> Bool in
            state.end = max(state.end, end)
            guard !state.scheduled else { return false }
            state.scheduled = true
            return true
        }
        guard schedule else { return }
        Task {
            let latest = self.state.withLock { state -> UInt64 in
                state.scheduled = false
                return state.end
            }
            await self.deliver(latest)
        }
    }
}
