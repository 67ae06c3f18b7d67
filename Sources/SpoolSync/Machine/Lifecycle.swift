extension SyncStateMachine {
    /// Where the machine is in its life: one value, so that no combination of flags can say
    /// two things at once.
    ///
    ///     live(notStarted) → live(running) ⇄ live(paused)     (start, pause, resume)
    ///     idle → draining → idle                               (a trigger or a flush; the drain ends)
    ///     draining → backingOff → draining                     (a failure; its backoff ends)
    ///     any → stopped                                        (stop, a fatal answer, damage with
    ///                                                            onDamage: .stop, a broken invariant)
    ///
    /// A drain runs whatever the worker does: a flush drains a worker never started, or paused.
    package enum Lifecycle: Sendable {
        case live(Worker, Drain)
        /// Stopped for good: nothing more is read, sent or committed, and every flush ends
        /// with ``SyncError/Code/stopped``.
        case stopped
    }

    /// What the worker's owner asked for: whether the automatic policies (the interval timer,
    /// the count trigger, retries after a backoff) apply.
    package enum Worker: Sendable {
        case notStarted
        case running
        case paused
    }

    /// Whether a drain runs. `retryOwed`: a drain was cut short by a retryable failure when
    /// nobody wanted it to go on; the worker retries when it runs again. A drain that goes on
    /// with someone wanting it pays the retry.
    package enum Drain: Sendable {
        case idle(retryOwed: Bool)
        /// Reading, sending, committing, or waiting for answers. `caughtUp`: the last read
        /// found nothing past the window, so nothing is read until the window changes or the
        /// log grows.
        case draining(caughtUp: Bool, retryOwed: Bool)
        /// Waiting to retry until `until`.
        case backingOff(until: Duration, retryOwed: Bool)

        var retryOwed: Bool {
            switch self {
            case .idle(let owed), .draining(_, let owed), .backingOff(_, let owed): owed
            }
        }
    }

    /// Started, not paused, not stopped: the automatic policies apply.
    package var isRunning: Bool {
        if case .live(.running, _) = lifecycle { return true }
        return false
    }

    package var isStopped: Bool {
        if case .stopped = lifecycle { return true }
        return false
    }

    /// Not stopped, and no drain runs or waits to retry.
    var isIdle: Bool {
        if case .live(_, .idle) = lifecycle { return true }
        return false
    }

    /// A drain runs.
    var isDraining: Bool {
        if case .live(_, .draining) = lifecycle { return true }
        return false
    }

    /// The worker owes a retry of a drain a retryable failure cut short.
    var retryOwed: Bool {
        if case .live(_, let drain) = lifecycle { return drain.retryOwed }
        return false
    }

    /// The drain's last read found nothing past the window.
    var caughtUp: Bool {
        if case .live(_, .draining(caughtUp: true, _)) = lifecycle { return true }
        return false
    }
}
