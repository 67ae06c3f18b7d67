import Spool

// MARK: - Answers: each request's outcome, as it comes

extension SyncStateMachine {
    /// The request in `slot` was answered: the answer is kept on its batch (committed once
    /// everything before it is settled), the controller learns its round trip, and the free
    /// slot is refilled at once.
    mutating func uploadCompleted(slot: Int, _ outcome: SinkOutcome, bytes: Int, now: Duration, jitter: Double) -> [Action] {
        noteLateRequests(now: now)
        // A copy no longer needed: its batch is settled (or gone), whatever it says now.
        if retired.remove(slot) != nil { return pump(now: now) }
        let wasLate = late.remove(slot) != nil
        if let request = abandoned.removeValue(forKey: slot) {
            // Its batch left the window behind a failure; the answer still tells of the server,
            // and a failure still counts against the range's retries.
            var actions: [Action] = []
            if case .retry(let error) = outcome {
                count(error)
                failuresAwaitingRetry += 1
                // The batches read again over its range since count it too.
                let over = window.indices.filter { window[$0].start < request.range.upperBound && request.range.lowerBound < window[$0].end }
                let failures = attempts.failed(request.range, after: over.map { window[$0].failures }.max() ?? 0)
                for index in over { window[index].failures = max(window[index].failures, failures) }
                actions = failWaiters(error, notify: true) { $0.retries < failures }
            }
            learn(outcome, roundTrip: now - request.sent, wasLate: wasLate, now: now)
            return actions + pump(now: now)
        }
        if let index = window.firstIndex(where: { $0.hedge?.slot == slot }) {
            return hedgeAnswered(at: index, outcome, bytes: bytes, now: now, jitter: jitter)
        }
        guard let index = window.firstIndex(where: { $0.slot == slot }), case .inFlight(_, let sent) = window[index].state else {
            return []
        }
        if case .accepted = outcome { hedging.measured(now - sent) }
        // The first copy answered: its hedge, if one is out, is no longer needed. It runs to
        // its answer, which is ignored (see ``retired``).
        if let hedge = window[index].hedge {
            window[index].hedge = nil
            retired.insert(hedge.slot)
        }
        return answered(at: index, outcome, bytes: bytes, sent: sent, wasLate: wasLate, now: now, jitter: jitter)
    }

    /// The hedge of the batch at `index` was answered. Accepted, it settles the batch (the
    /// first copy runs on, and its answer, whatever it says, is ignored); a fatal answer
    /// stops the worker as any does. Any other failure is forgotten (counted in ``stats``
    /// only): the first copy, still in flight, carries the batch as it did before the hedge.
    private mutating func hedgeAnswered(at index: Int, _ outcome: SinkOutcome, bytes: Int, now: Duration, jitter: Double) -> [Action] {
        guard let hedge = window[index].hedge, case .inFlight(let slot, let sent) = window[index].state else { return [] }
        window[index].hedge = nil
        switch outcome {
        case .accepted:
            hedging.measured(now - hedge.sent)
            retired.insert(slot)
            // The controller learns of the batch's request once: accepted now, as sent with
            // the first copy (late if that one was reported late).
            let wasLate = late.remove(slot) != nil
            return answered(at: index, outcome, bytes: bytes, sent: sent, wasLate: wasLate, now: now, jitter: jitter)
        case .fatal:
            return answered(at: index, outcome, bytes: bytes, sent: sent, wasLate: false, now: now, jitter: jitter)
        case .retry(let error), .tooLarge(let error), .rejected(let error):
            count(error)
            return pump(now: now)
        }
    }

    /// The request of the batch at `index`, sent at `sent`, was answered (by its first copy,
    /// or by its hedge accepted): the answer is kept on the batch, and the controller learns
    /// its round trip.
    private mutating func answered(
        at index: Int, _ outcome: SinkOutcome, bytes: Int, sent: Duration, wasLate: Bool, now: Duration, jitter: Double
    ) -> [Action] {
        learn(outcome, roundTrip: now - sent, wasLate: wasLate, now: now)
        var batch = window[index]
        switch outcome {
        case .accepted:
            window[index].state = .answered(.accepted(bytes: bytes))
            retryBudget.accepted()
            acceptedUnderCeiling += 1
            acceptedSinceFailure = true
            if !halted {
                // Accepted answers clear the failure state; with a failure in the window they
                // do not, so its backoff and `Retry-After` stand.
                consecutiveFailures = 0
                backoffUntil = nil
                serverWait = nil
            }
            raiseCeiling()
        case .retry(let error):
            count(error)
            retryBudget.failed()
            // One count of failures per batch, whatever retries it (on its own, after a
            // go-back, as the halves of a split): a flush allowing fewer retries ends before
            // the batch is sent again.
            window[index].failures += 1
            if let alone = retryAlone(at: index, error, now: now, jitter: jitter) { return alone + pump(now: now) }
            failuresAwaitingRetry += 1
            // Batches accepted since the last failure are progress: the backoff starts over, as
            // it does with one request in flight after an accepted batch. A failure of one batch
            // while others succeed is not the same signal as every request failing.
            if acceptedSinceFailure { consecutiveFailures = 0 }
            acceptedSinceFailure = false
            window[index].state = .answered(.failed(error, until: backOff(after: error, now: now, jitter: jitter)))
            dropWindow(after: index)
        case .tooLarge(let error), .rejected(let error):
            count(error)
            if case .tooLarge = outcome {
                lowerCeiling(below: batch)
                // Batches read but not sent were cut for the old limits: read them again.
                while window.count > index + 1, window[window.count - 1].isUnsent { attempts.keep(window.removeLast()) }
                caughtUp = false
                damageAhead = nil
            }
            if batch.records.count > 1 {
                // Bisect: the halves go first, so a poison record ends up alone and the rest still arrive.
                let (first, second) = batch.split()
                stats.splits += 1
                window.replaceSubrange(index...index, with: [first, second])
            } else {
                batch.state = .answered(.refused(error))
                window[index] = batch
            }
        case .fatal(let error):
            count(error)
            stats.fatalError = error
            return halt(error) + [.shutDown]
        }
        return pump(now: now)
    }

    /// A failed batch retried on its own, after its own backoff, while the rest of the window
    /// keeps flowing (the offset still never passes it): when more than one request may be in
    /// flight (`.fixed(1)` keeps its batches in seq order at the server, so there the window
    /// halts and goes back, as it always did), the ``RetryBudget`` allows it, and someone still
    /// wants the drain after the flushes that allow fewer retries than the batch's failures, or
    /// whose deadline comes first, end with the failure. Nil when it is not: the window halts
    /// behind it and the worker backs off.
    ///
    /// A `Retry-After` on one answer among accepted ones binds its batch (it goes no sooner),
    /// not the window: the requests in flight are not abandoned and sent again, and the
    /// controller weighs it as any overloaded answer (a share of the traffic lowers the limit).
    /// Read as "everything waits", one answer past a server's request slots (the reference
    /// collector's 503 `Retry-After: 1` until issue 34) halted an adaptive window, dropped
    /// what was in flight and re-sent it: 593 retries and 56,350 repeats for 200,000 events.
    /// When failures are most of the answers (the budget is spent), the whole worker waits
    /// for the server's `Retry-After`, as it always did.
    private mutating func retryAlone(at index: Int, _ error: SyncError, now: Duration, jitter: Double) -> [Action]? {
        guard concurrency.maximum > 1, retryBudget.allowsRetry else { return nil }
        let failures = window[index].failures
        let until = now + selectiveDelay(afterFailures: failures, retryAfter: error.retryAfter, jitter: jitter)
        let minimum = minimumRequestTime
        func keeps(_ waiter: Waiter) -> Bool {
            waiter.retries >= failures && (waiter.deadline.map { until + minimum <= $0 } ?? true)
        }
        guard isRunning || waiters.contains(where: keeps) else { return nil }
        var actions: [Action] = waiters.isEmpty ? [] : [.notify(ids: waiters.map(\.id), .error(error))]
        waiters.removeAll { waiter in
            guard !keeps(waiter) else { return false }
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
            return true
        }
        window[index].state = .unsent
        window[index].retryAt = until
        return actions
    }

    /// The wait before a batch that failed among accepted ones goes again: the backoff's
    /// schedule (full jitter, ×`factor` per failure of this batch, up to `cap`, never before
    /// `Retry-After`), started from the recent round trip instead of `backoff.base` when that
    /// is shorter (at least 1 ms).
    ///
    /// The server took the requests beside it, so the failure is this request's, not the
    /// server's state: Finagle's `RequeueFilter` sends such a request again at once, within its
    /// `RetryBudget`. A round trip is the wait that lets the other requests' answers arrive
    /// first. From `base` (100 ms), 20% of 503s at a round trip of 0.3 ms cost 84–89% of the
    /// rate: a drain ended with the batch whose three or four failures in a row had waited
    /// 50, 100, 200 and 400 ms on average. A batch that keeps failing still doubles its wait,
    /// and once the window is full behind it the budget is spent and the worker backs off as a
    /// whole.
    private func selectiveDelay(afterFailures failures: Int, retryAfter: Duration?, jitter: Double) -> Duration {
        var backoff = configuration.backoff
        if let roundTrip = concurrency.average, roundTrip < backoff.base {
            backoff.base = max(roundTrip, .milliseconds(1))
        }
        return backoff.delay(afterFailures: failures, retryAfter: retryAfter, unit: jitter)
    }

    /// Tells the controller how a request went, and the stats where it stands.
    private mutating func learn(_ outcome: SinkOutcome, roundTrip: Duration, wasLate: Bool, now: Duration) {
        let signal: ConcurrencyController.Signal
        switch outcome {
        case .accepted: signal = .accepted
        case .retry(let error): signal = error.overloaded ? .overloaded : .failed
        case .fatal: signal = .failed
        case .tooLarge, .rejected: signal = .neutral
        }
        concurrency.answered(roundTrip: roundTrip, signal, wasLate: wasLate, now: now)
        stats.concurrency = concurrency.limit
        stats.peakConcurrency = concurrency.peak
    }

    /// Requests in flight past the controller's ``ConcurrencyController/lateAfter`` are
    /// reported, once each: a stall is a sign of strain before it ends. Hedges are not: the
    /// controller sees each batch's request once, through its first copy.
    private mutating func noteLateRequests(now: Duration) {
        guard concurrency.adaptive, let after = concurrency.lateAfter else { return }
        var sent = abandoned.map { (slot: $0.key, at: $0.value.sent) }
        for batch in window {
            if case .inFlight(let slot, let at) = batch.state { sent.append((slot, at)) }
        }
        for request in sent where now - request.at > after && !late.contains(request.slot) {
            late.insert(request.slot)
            concurrency.late(sent: request.at, now: now)
        }
    }

    /// Drops every batch after `index` (after a failure there): those in flight are
    /// abandoned, and all are read again after the retry, with what they went through.
    mutating func dropWindow(after index: Int) {
        for batch in window[(index + 1)...] {
            attempts.keep(batch)
            if case .inFlight(let slot, let sent) = batch.state { abandoned[slot] = (sent, batch.start..<batch.end) }
            if let hedge = batch.hedge { retired.insert(hedge.slot) }
        }
        window.removeSubrange((index + 1)...)
        caughtUp = false
        damageAhead = nil  // found again when what follows is read again
    }

    /// A 413: batches from now on hold at most half of the refused one, in records and in
    /// encoded body bytes (what `maxBatchBytes` limits), so later batches do not walk the same
    /// chain of 413s again.
    private mutating func lowerCeiling(below batch: SyncBatch) {
        let (count, bytes) = batchLimits
        ceiling = (min(count, max(1, batch.records.count / 2)), min(bytes, max(1, batch.bodyBytes / 2)))
        acceptedUnderCeiling = 0
    }

    /// Batches accepted under a ceiling let it grow back slowly: a quarter more every
    /// ``ceilingGrowthBatches`` accepted batches, until it reaches the configuration.
    private mutating func raiseCeiling() {
        guard let current = ceiling, acceptedUnderCeiling >= Self.ceilingGrowthBatches else { return }
        acceptedUnderCeiling = 0
        let count = current.count + max(1, current.count / 4)
        let bytes = current.bytes + max(1, current.bytes / 4)
        ceiling = count >= configuration.maxBatchCount && bytes >= configuration.maxBatchBytes ? nil : (count, bytes)
    }

    /// Accepted batches between two raises of a 413 ceiling.
    static let ceilingGrowthBatches = 32

    /// A lone record the server refuses: dead-letter it (or skip it), then commit past it.
    mutating func refuse(_ batch: SyncBatch, _ error: SyncError) -> [Action] {
        let log = Action.logRefusal(error, records: batch.records.count)
        guard configuration.deadLetterEnabled else {
            return [log] + commit(upTo: batch.end, .deadLettered(records: batch.records.count), passing: batch.damage)
        }
        local = .deadLettering(batch)
        return [log, .deadLetter(Array(batch.records), error)]
    }

    mutating func deadLetterCompleted(now: Duration) -> [Action] {
        guard case .deadLettering(let batch) = local else { return [] }
        return commit(upTo: batch.end, .deadLettered(records: batch.records.count), passing: batch.damage)
    }

    /// Commits the consumer to `end`; when that passes damaged ranges, they are recorded first
    /// (every skipped range is recorded before the offset passes it).
    mutating func commit(upTo end: UInt64, _ kind: CommitKind, passing damage: [DamagedRange]) -> [Action] {
        guard damage.isEmpty else {
            local = .recordingDamage(end: end, kind, damage)
            return [.recordDamage(damage)]
        }
        local = .committing(end: end, kind)
        return [.commit(upTo: end)]
    }

    /// The damaged ranges are recorded: the commit that passes them goes on (they are counted
    /// once it completes).
    mutating func damageRecorded() -> [Action] {
        guard case .recordingDamage(let end, let kind, let damage) = local else { return [] }
        damagePassed = damage
        local = .committing(end: end, kind)
        return [.commit(upTo: end)]
    }

    mutating func commitCompleted(now: Duration) -> [Action] {
        guard case .committing(let end, let kind) = local else { return [] }
        local = nil
        stats.committed = max(stats.committed, end)
        stats.pending = pending
        attempts.forget(below: stats.committed)
        var actions: [Action] = []
        if !damagePassed.isEmpty {
            stats.damaged.add(damagePassed)
            for index in waiters.indices { waiters[index].report.damaged.add(damagePassed) }
            if !waiters.isEmpty { actions.append(.notify(ids: waiters.map(\.id), .damaged(damagePassed))) }
            damagePassed = []
        }
        switch kind {
        case .delivered(let batches, let records, let bytes):
            stats.batches += batches
            stats.records += records
            stats.bytes += bytes
            for index in waiters.indices {
                waiters[index].report.batches += batches
                waiters[index].report.records += records
                waiters[index].report.bytes += bytes
            }
            if !waiters.isEmpty {
                actions += Array(repeating: .notify(ids: waiters.map(\.id), .good), count: batches)
            }
        case .deadLettered(let records):
            stats.deadLettered += records
            for index in waiters.indices { waiters[index].report.deadLettered += records }
            if !waiters.isEmpty { actions.append(.notify(ids: waiters.map(\.id), .good)) }
        case .skipped:
            break
        }
        // A flush that waits for an offset is answered once the consumer is committed that far.
        waiters.removeAll { waiter in
            guard let through = waiter.through, through <= stats.committed else { return false }
            actions.append(.finishFlush(id: waiter.id, waiter.report))
            return true
        }
        return actions + pump(now: now)
    }
}

// MARK: - Failures

extension SyncStateMachine {
    /// When the retry of a request that failed with `error` may start: after the backoff, and
    /// never before the server's `Retry-After` (capped at `backoff.maxRetryAfter`), nor before
    /// the wait a batch retried on its own was given (its `Retry-After`): the window is
    /// dropped and read again, and a batch read again must not go sooner than it would have.
    private mutating func backOff(after error: SyncError, now: Duration, jitter: Double) -> Duration {
        consecutiveFailures += 1
        if let retryAfter = error.retryAfter {
            serverWait = (now + min(max(retryAfter, .zero), configuration.backoff.maxRetryAfter), error)
        }
        let delay = now + configuration.backoff.delay(afterFailures: consecutiveFailures, retryAfter: error.retryAfter, unit: jitter)
        return window.compactMap { $0.isUnsent ? $0.retryAt : nil }.reduce(delay, max)
    }

    /// A request failed in a way worth retrying, and everything before it is committed: back
    /// off until `until`, and retry (reading the batch again) if anybody still wants the drain.
    mutating func retryableFailure(_ error: SyncError, until: Duration, now: Duration) -> [Action] {
        backoffUntil = until
        // The retry reads again from the committed offset rather than re-sending this batch
        // from memory: records that expired (`maxAge`, `reportingDeadline`) or were dropped
        // by the cap during the backoff are then skipped and counted, never uploaded. The
        // window goes too; the read makes the same batches again, in the same order, and they
        // get back the failures they had (``attempts``). The flushes allowing fewer retries
        // than a batch read again has failed end (the failed one's, or one dropped behind a
        // failure), and those whose deadline comes first.
        dropWindow(after: -1)
        let failures = attempts.mostFailures
        var actions: [Action] = waiters.isEmpty ? [] : [.notify(ids: waiters.map(\.id), .error(error))]
        let minimum = minimumRequestTime
        actions += failWaiters(error, notify: false) { waiter in
            waiter.retries < failures || !(waiter.deadline.map { until + minimum <= $0 } ?? true)
        }
        retryOwed = true
        guard wanted else {
            endDrain()
            return actions
        }
        backoffGeneration += 1
        phase = .backingOff(until: until)
        actions.append(.backoff(until: until, generation: backoffGeneration))
        return actions
    }

    /// A read, a commit or a dead-letter write failed: end the drain with the error. Nothing
    /// is retried by itself (no loop, no endless re-upload); the next flush reads again from
    /// the offset on disk, and automatic flushes wait out a backoff first. Requests in flight
    /// are abandoned: their answers are not committed.
    mutating func haltingFailure(_ error: SyncError, now: Duration, jitter: Double) -> [Action] {
        guard local != nil else { return [] }
        local = nil
        damagePassed = []
        count(error)
        consecutiveFailures += 1
        backoffUntil = now + configuration.backoff.delay(afterFailures: consecutiveFailures, unit: jitter)
        dropWindow(after: -1)
        retryOwed = false
        endDrain()
        return failWaiters(error, notify: true)
    }

    /// Answers the waiting flushes `ending` picks (every one by default) with `error`, told
    /// through `notify` first when asked, and forgets them.
    mutating func failWaiters(_ error: SyncError, notify: Bool, where ending: (Waiter) -> Bool = { _ in true }) -> [Action] {
        let ended = waiters.filter(ending)
        guard !ended.isEmpty else { return [] }
        waiters.removeAll(where: ending)
        var actions: [Action] = notify ? [.notify(ids: ended.map(\.id), .error(error))] : []
        for waiter in ended {
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
        }
        return actions
    }

    mutating func count(_ error: SyncError) {
        stats.failures[error.code, default: 0] += 1
        stats.lastError = error
    }
}
