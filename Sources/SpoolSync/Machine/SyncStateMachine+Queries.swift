import Spool

// MARK: - What the machine's state says, read without changing it

extension SyncStateMachine {
    /// Records written and not yet committed, as far as the machine knows.
    var pending: UInt64 { writtenEnd > stats.committed ? writtenEnd - stats.committed : 0 }

    /// The least time left before a flush's deadline for a request to start: below it the
    /// flush ends (``FlushReport/deadlineReached``). It is 1 s, or `requestTimeout` if that is
    /// shorter: a request cut shorter than this rarely gets an answer, and a failed one is
    /// retried later anyway.
    var minimumRequestTime: Duration { min(SyncConfiguration.minimumRequestTime, configuration.requestTimeout) }

    /// The timeout of a request starting `now`: `requestTimeout`, cut to the earliest deadline
    /// of the flushes waiting, so that a background budget shorter than `requestTimeout` is
    /// still used and the flush still ends by its deadline.
    func requestTimeout(now: Duration) -> Duration {
        flushes.timeout(now: now, limit: configuration.requestTimeout)
    }

    /// The offset past the window's last batch: where the records of the next read start.
    var windowEnd: UInt64 { window.batches.last?.end ?? stats.committed }

    /// A failed batch is in the window.
    var halted: Bool { window.failedIndex != nil }

    /// Someone wants the drain to go on: a flush waiting, or the worker running.
    var wanted: Bool { isRunning || !flushes.isEmpty }

    /// With only flushes that wait for an offset (`spool sync --once`) and the worker not
    /// running, the furthest of those offsets: nothing at or past it is read.
    var readLimit: UInt64? {
        guard !isRunning, !flushes.isEmpty else { return nil }
        var limit: UInt64 = 0
        for waiter in flushes.waiting {
            guard let through = waiter.through else { return nil }
            limit = max(limit, through)
        }
        return limit
    }

    /// When the request of the batch at `index` may be hedged: it is in flight, was never
    /// hedged, and ``Hedging`` allows one. Nil when it may not.
    func hedgeDue(at index: Int) -> Duration? {
        guard case .inFlight(_, let sent) = window.batches[index].state, !window.batches[index].hedged else { return nil }
        return hedging.due(sent: sent)
    }

    /// The configuration's most records and encoded body bytes of one batch.
    var configuredLimits: (count: Int, bytes: Int) { (configuration.maxBatchCount, configuration.maxBatchBytes) }

    /// The most records and encoded body bytes of one batch: the configuration's, or less
    /// under a ceiling a 413 set.
    var batchLimits: (count: Int, bytes: Int) { ceiling.limits(configuredLimits) }

    /// What is wrong with the machine's state, if anything: the window's invariants
    /// (``Window/checkInvariants(from:)``, from the committed offset or the end of the commit
    /// in flight), and, outside a drain, no batch and no local operation. Nil when all hold,
    /// or when the machine is stopped. The simulator calls it after every step.
    package func checkInvariants() -> String? {
        guard case .live(_, let drain) = lifecycle else { return nil }
        if case .draining = drain {} else {
            guard window.isEmpty else { return "\(window.batches.count) batches are in the window outside a drain" }
            guard local == nil else { return "a local operation runs outside a drain" }
        }
        let base: UInt64
        switch local {
        case .committing(let end, _)?, .recordingDamage(let end, _, _)?: base = end
        case .deadLettering(let batch)?: base = batch.end
        case .reading?, nil: base = stats.committed
        }
        return window.checkInvariants(from: base)
    }
}

extension SyncStateMachine {
    /// The wait before a batch that failed among accepted ones goes again: the backoff's
    /// schedule (full jitter, ×`factor` per failure of this batch, up to `cap`, never before
    /// `Retry-After`), started from the recent round trip instead of `backoff.base` when that
    /// is shorter (at least 1 ms).
    ///
    /// The server took the requests beside it, so the failure is this request's, not the
    /// server's state: Finagle's `RequeueFilter` sends such a request again at once, within its
    /// `RetryBudget`. A round trip is the wait that lets the other requests' answers arrive
    /// first. A batch that keeps failing still doubles its wait, and once the window is full
    /// behind it the budget is spent and the worker backs off as a whole.
    func selectiveDelay(afterFailures failures: Int, retryAfter: Duration?, jitter: Double) -> Duration {
        var backoff = configuration.backoff
        if let roundTrip = concurrency.average, roundTrip < backoff.base {
            backoff.base = max(roundTrip, .milliseconds(1))
        }
        return backoff.delay(afterFailures: failures, retryAfter: retryAfter, unit: jitter)
    }
}
