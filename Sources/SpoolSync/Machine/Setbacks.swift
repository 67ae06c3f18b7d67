extension SyncStateMachine {
    /// What recent failures hold back, across drains: the backoff's count of failures in a
    /// row, the time before which automatic flushes wait, and the server's `Retry-After`.
    ///
    /// A drain of a manual flush may run while automatic flushes are held, and a `Retry-After`
    /// binds every drain until it passes, so none of this belongs to one drain. An accepted
    /// batch clears it (unless a failed batch is still in the window). Pure.
    struct Setbacks: Sendable {
        /// Failures in a row: the backoff's exponent.
        private(set) var consecutive = 0
        /// A batch was accepted since the last failure: the next failure starts the backoff over.
        private var acceptedSinceFailure = false
        /// Failed requests whose batches are not sent again yet: the next request sent retries
        /// them (counted in ``SyncStats/retries`` then).
        private var awaitingRetry = 0
        /// Automatic flushes (timer, count) do not start before this time.
        private var automaticUntil: Duration?
        /// The server said when to come back (`Retry-After`, capped at `backoff.maxRetryAfter`):
        /// no request starts before then, not even a manual flush's.
        private var server: (until: Duration, error: SyncError)?

        /// Automatic flushes wait at `now`.
        func holdsAutomatic(_ now: Duration) -> Bool {
            automaticUntil.map { $0 > now } ?? false
        }

        /// When automatic flushes may start again, if they wait at `now`.
        func automaticWait(_ now: Duration) -> Duration? {
            holdsAutomatic(now) ? automaticUntil : nil
        }

        /// The server's wait still running at `now`, with the error that asked for it.
        func serverWait(_ now: Duration) -> (until: Duration, error: SyncError)? {
            server.flatMap { $0.until > now ? $0 : nil }
        }

        /// A batch was accepted. `clears`: no failed batch is in the window, so the failures,
        /// the held automatic flushes and the server's wait are over (with one in the window,
        /// its backoff and `Retry-After` stand).
        mutating func accepted(clears: Bool) {
            acceptedSinceFailure = true
            guard clears else { return }
            consecutive = 0
            automaticUntil = nil
            server = nil
        }

        /// A request whose batch left the window failed in a way worth retrying.
        mutating func abandonedRequestFailed() {
            awaitingRetry += 1
        }

        /// A batch failed and halts the window with `error`.
        /// - Returns: when the retry may start by the backoff and `Retry-After` (capped at
        ///   `backoff.maxRetryAfter`); accepted batches since the last failure start the
        ///   backoff over, a failure among successes not being the signal of every request failing.
        mutating func windowFailed(_ error: SyncError, now: Duration, backoff: Backoff, jitter: Double) -> Duration {
            awaitingRetry += 1
            if acceptedSinceFailure { consecutive = 0 }
            acceptedSinceFailure = false
            consecutive += 1
            if let retryAfter = error.retryAfter {
                server = (now + min(max(retryAfter, .zero), backoff.maxRetryAfter), error)
            }
            return now + backoff.delay(afterFailures: consecutive, retryAfter: error.retryAfter, unit: jitter)
        }

        /// A read, a commit or a dead-letter write failed: automatic flushes wait out a backoff.
        mutating func localFailed(now: Duration, backoff: Backoff, jitter: Double) {
            consecutive += 1
            automaticUntil = now + backoff.delay(afterFailures: consecutive, unit: jitter)
        }

        /// The window backs off until `until`: automatic flushes wait as long.
        mutating func holdAutomatic(until: Duration) {
            automaticUntil = until
        }

        /// A request is sent: it retries every failure since the last one sent.
        /// - Returns: how many failures it retries.
        mutating func requestSent() -> Int {
            defer { awaitingRetry = 0 }
            return awaitingRetry
        }
    }
}
