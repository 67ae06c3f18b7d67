import Spool

// MARK: - The drain: read, upload, commit, and again

extension SyncStateMachine {
    /// The least time left before a flush's deadline for a request to start: below it the
    /// flush ends (``FlushReport/deadlineReached``). It is 1 s, or `requestTimeout` if that is
    /// shorter: a request cut shorter than this rarely gets an answer, and a failed one is
    /// retried later anyway.
    var minimumRequestTime: Duration { min(SyncConfiguration.minimumRequestTime, configuration.requestTimeout) }

    /// The timeout of a request starting `now`: `requestTimeout`, cut to the earliest deadline
    /// of the flushes waiting, so that a background budget shorter than `requestTimeout` is
    /// still used and the flush still ends by its deadline.
    func requestTimeout(now: Duration) -> Duration {
        waiters.compactMap(\.deadline).reduce(configuration.requestTimeout) { min($0, $1 - now) }
    }

    /// From idle, inside a drain: starts the next operation, or ends the drain if nobody wants
    /// more. This is where deadlines are checked, before each new request.
    mutating func nextStep(now: Duration) -> [Action] {
        var actions: [Action] = []
        let minimum = minimumRequestTime
        waiters.removeAll { waiter in
            guard let deadline = waiter.deadline, deadline - now < minimum else { return false }
            var report = waiter.report
            report.deadlineReached = true
            actions.append(.finishFlush(id: waiter.id, report))
            return true
        }
        guard !waiters.isEmpty || isRunning else {
            phase = .idle
            return actions
        }
        retryOwed = false
        if !queue.isEmpty {
            let batch = queue.removeFirst()
            if batch.records.isEmpty {
                phase = .committing(batch, .skipped)
                actions.append(.commit(upTo: batch.end))
            } else {
                phase = .uploading(batch)
                actions.append(.upload(batch, timeout: requestTimeout(now: now)))
            }
        } else {
            phase = .reading
            writtenEndAtRead = writtenEnd
            actions.append(.read(maxCount: configuration.maxBatchCount, maxBytes: configuration.maxBatchBytes))
        }
        return actions
    }

    mutating func readCompleted(_ batch: SyncBatch, now: Duration) -> [Action] {
        guard case .reading = phase else { return [] }
        if batch.records.isEmpty && batch.end <= stats.committed {
            // Nothing to read: the drain is done. `writtenEnd` stays: a write noticed while
            // this read ran may be past what it saw, and the next timer tick must still see it.
            stats.pending = pending
            phase = .idle
            let ids = waiters.map(\.id)
            var actions: [Action] = ids.isEmpty ? [] : [.notify(ids: ids, .noData)]
            actions += waiters.map { .finishFlush(id: $0.id, $0.report) }
            waiters.removeAll()
            return actions + countTriggerMissedDuringRead(now: now)
        }
        writtenEnd = max(writtenEnd, batch.end)
        stats.pending = pending
        queue.insert(batch, at: 0)
        phase = .idle
        return nextStep(now: now)
    }

    /// After a read that found nothing: the count trigger that writes noticed during the read
    /// could not fire (the machine was busy), fired now. Without it, with periodic flushing
    /// off, those records would wait for the next write. Only writes noticed during the read
    /// count, so a pending count the log cannot deliver yet never makes the drain spin.
    private mutating func countTriggerMissedDuringRead(now: Duration) -> [Action] {
        guard writtenEnd > writtenEndAtRead, isRunning, !inBackoff(now), pending >= UInt64(configuration.flushCount) else {
            return []
        }
        return nextStep(now: now)
    }

    mutating func uploadCompleted(_ outcome: UploadOutcome, bytes: Int, now: Duration, jitter: Double) -> [Action] {
        guard case .uploading(let batch) = phase else { return [] }
        switch outcome {
        case .accepted:
            consecutiveFailures = 0
            backoffUntil = nil
            serverWait = nil
            stats.batches += 1
            stats.records += batch.records.count
            stats.bytes += bytes
            phase = .committing(batch, .delivered(bytes: bytes))
            return [.commit(upTo: batch.end)]
        case .retry(let error):
            return retryableFailure(batch, error, now: now, jitter: jitter)
        case .tooLarge(let error), .rejected(let error):
            count(error)
            consecutiveFailures = 0
            guard batch.records.count > 1 else {
                return refuse(batch, error)
            }
            // Bisect: the halves go first, so a poison record ends up alone and the rest still arrive.
            let (first, second) = batch.split()
            stats.splits += 1
            queue.insert(contentsOf: [first, second], at: 0)
            phase = .idle
            return nextStep(now: now)
        }
    }

    /// A lone record the server refuses: dead-letter it (or skip it), then commit past it.
    private mutating func refuse(_ batch: SyncBatch, _ error: SyncError) -> [Action] {
        let log = Action.logRefusal(error, records: batch.records.count)
        guard configuration.deadLetterEnabled else {
            phase = .committing(batch, .deadLettered)
            return [log, .commit(upTo: batch.end)]
        }
        phase = .deadLettering(batch)
        return [log, .deadLetter(batch.records, error)]
    }

    mutating func deadLetterCompleted() -> [Action] {
        guard case .deadLettering(let batch) = phase else { return [] }
        phase = .committing(batch, .deadLettered)
        return [.commit(upTo: batch.end)]
    }

    mutating func commitCompleted(now: Duration) -> [Action] {
        guard case .committing(let batch, let kind) = phase else { return [] }
        stats.committed = max(stats.committed, batch.end)
        stats.pending = pending
        var actions: [Action] = []
        switch kind {
        case .delivered(let bytes):
            for index in waiters.indices {
                waiters[index].report.batches += 1
                waiters[index].report.records += batch.records.count
                waiters[index].report.bytes += bytes
            }
            if !waiters.isEmpty { actions.append(.notify(ids: waiters.map(\.id), .good)) }
        case .deadLettered:
            stats.deadLettered += batch.records.count
            for index in waiters.indices { waiters[index].report.deadLettered += batch.records.count }
            if !waiters.isEmpty { actions.append(.notify(ids: waiters.map(\.id), .good)) }
        case .skipped:
            break
        }
        phase = .idle
        return actions + nextStep(now: now)
    }
}

// MARK: - Failures

extension SyncStateMachine {
    /// A request failed in a way worth retrying: back off, and retry (reading the batch
    /// again) if anybody still wants the drain.
    mutating func retryableFailure(_ batch: SyncBatch, _ error: SyncError, now: Duration, jitter: Double) -> [Action] {
        count(error)
        stats.retries += 1
        consecutiveFailures += 1
        let until = now + configuration.backoff.delay(afterFailures: consecutiveFailures, retryAfter: error.retryAfter, unit: jitter)
        backoffUntil = until
        if let retryAfter = error.retryAfter {
            serverWait = (now + min(max(retryAfter, .zero), configuration.backoff.maxRetryAfter), error)
        }
        // The retry reads again from the committed offset rather than re-sending this batch
        // from memory: records that expired (`maxAge`, `reportingDeadline`) or were dropped
        // by the cap during the backoff are then skipped and counted, never uploaded. Queued
        // halves of a split go too; the read makes the same batch again, in the same order.
        queue.removeAll()
        var actions: [Action] = waiters.isEmpty ? [] : [.notify(ids: waiters.map(\.id), .error(error))]
        let minimum = minimumRequestTime
        waiters.removeAll { waiter in
            let fits = waiter.deadline.map { until + minimum <= $0 } ?? true
            if waiter.retriesLeft > 0 && fits { return false }
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
            return true
        }
        for index in waiters.indices { waiters[index].retriesLeft -= 1 }
        retryOwed = true
        guard !waiters.isEmpty || isRunning else {
            phase = .idle
            return actions
        }
        backoffGeneration += 1
        phase = .backingOff(until: until)
        actions.append(.backoff(until: until, generation: backoffGeneration))
        return actions
    }

    /// A read, a commit or a dead-letter write failed: end the drain with the error. Nothing
    /// is retried by itself (no loop, no endless re-upload); the next flush reads again from
    /// the offset on disk, and automatic flushes wait out a backoff first.
    mutating func haltingFailure(_ error: SyncError, now: Duration, jitter: Double) -> [Action] {
        switch phase {
        case .reading, .deadLettering, .committing: break
        default: return []
        }
        count(error)
        consecutiveFailures += 1
        backoffUntil = now + configuration.backoff.delay(afterFailures: consecutiveFailures, unit: jitter)
        queue.removeAll()
        retryOwed = false
        phase = .idle
        var actions: [Action] = waiters.isEmpty ? [] : [.notify(ids: waiters.map(\.id), .error(error))]
        for waiter in waiters {
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
        }
        waiters.removeAll()
        return actions
    }

    private mutating func count(_ error: SyncError) {
        stats.failures[error.code, default: 0] += 1
        stats.lastError = error
    }
}
