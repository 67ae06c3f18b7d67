import Synchronization

/// Runs one send against a deadline measured on the worker's clock.
///
/// Whichever comes first wins: the sink's outcome, the timeout, or the cancellation of the
/// calling task. The loser is cancelled and abandoned, so a sink that ignores cancellation (or
/// a destination that hangs) can never hold the worker.
func timedSend<C: Clock>(
    clock: C, timeout: Duration, _ send: @escaping @Sendable () async -> SinkOutcome
) async -> SinkOutcome where C.Duration == Duration {
    let once = Once<SinkOutcome>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<SinkOutcome, Never>) in
            once.arm(continuation)
            let sending = Task { once.resume(await send()) }
            let timer = Task {
                do {
                    try await clock.sleep(for: timeout)
                    once.resume(.retry(SyncError(.timeout, "no answer within \(timeout)")))
                } catch {}  // cancelled: the send finished first
            }
            once.onResume {
                sending.cancel()
                timer.cancel()
            }
        }
    } onCancel: {
        once.resume(.failed(CancellationError()))
    }
}

/// A continuation resumed at most once, from whichever task gets there first.
private final class Once<Value: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Value, Never>?
        var early: Value?
        var done = false
        var cleanup: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    func arm(_ continuation: CheckedContinuation<Value, Never>) {
        let early = state.withLock { state -> Value? in
            if let early = state.early {
                state.early = nil
                return early
            }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func onResume(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.done { return true }
            state.cleanup = cleanup
            return false
        }
        if runNow { cleanup() }
    }

    func resume(_ value: Value) {
        let (continuation, cleanup) = state.withLock { state -> (CheckedContinuation<Value, Never>?, (@Sendable () -> Void)?) in
            guard !state.done else { return (nil, nil) }
            state.done = true
            defer { state.continuation = nil; state.cleanup = nil }
            if state.continuation == nil { state.early = value }
            return (state.continuation, state.cleanup)
        }
        continuation?.resume(returning: value)
        cleanup?()
    }
}
