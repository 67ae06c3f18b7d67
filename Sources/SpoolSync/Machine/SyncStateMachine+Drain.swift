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

    /// From idle, inside a drain: starts the next step, or ends the drain if nobody wants
    /// more. This is where deadlines are checked, before each new round of requests.
    ///
    /// The queue's head decides the step: accepted batches are committed (all of a run at
    /// once), a refused record is dead-lettered, a failure backs off, an empty batch (a
    /// skipped range) is committed, and batches still to send go out as a round. With nothing
    /// queued, the next read starts.
    mutating func nextStep(now: Duration) -> [Action] {
        if let head = queue.first, let answer = head.answer {
            // What the server answered is settled first, whoever still wants the drain: an
            // accepted batch is committed even while paused, as a single request always was.
            return settle(answer, now: now)
        }
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
        guard let head = queue.first else {
            phase = .reading
            writtenEndAtRead = writtenEnd
            let (count, bytes) = batchLimits
            let room = max(1, SyncConfiguration.maximumRoundBytes / bytes)
            actions.append(.read(maxCount: count, maxBytes: bytes, batches: min(concurrency.limit, room)))
            return actions
        }
        if head.records.isEmpty {
            queue.removeFirst()
            phase = .committing(end: head.end, .skipped)
            return actions + [.commit(upTo: head.end)]
        }
        var batches: [SyncBatch] = []
        while batches.count < concurrency.limit, let next = queue.first, next.answer == nil, !next.records.isEmpty {
            batches.append(queue.removeFirst())
        }
        let timeout = requestTimeout(now: now)
        let round = Round(batches: batches, answers: Array(repeating: nil, count: batches.count), firstSlot: nextSlot, started: now)
        nextSlot += batches.count
        stats.requests += batches.count
        phase = .uploading(round)
        return actions + batches.enumerated().map { .upload($1, slot: round.firstSlot + $0, timeout: timeout) }
    }

    /// The queue's head was answered: commit the run of accepted batches it starts, dead-letter
    /// a refused record, or back off for a failure.
    private mutating func settle(_ answer: SyncBatch.Answer, now: Duration) -> [Action] {
        switch answer {
        case .failed(let error, let until):
            return retryableFailure(error, until: until, now: now)
        case .refused(let error):
            return refuse(queue.removeFirst(), error)
        case .accepted:
            var delivered = (batches: 0, records: 0, bytes: 0)
            var end = stats.committed
            while case .accepted(let bytes) = queue.first?.answer {
                let batch = queue.removeFirst()
                delivered = (delivered.batches + 1, delivered.records + batch.records.count, delivered.bytes + bytes)
                end = batch.end
            }
            phase = .committing(end: end, .delivered(batches: delivered.batches, records: delivered.records, bytes: delivered.bytes))
            return [.commit(upTo: end)]
        }
    }

    /// The most records and payload bytes of one batch: the configuration's, or less under a
    /// ceiling a 413 set.
    var batchLimits: (count: Int, bytes: Int) {
        guard let ceiling else { return (configuration.maxBatchCount, configuration.maxBatchBytes) }
        return (min(ceiling.count, configuration.maxBatchCount), min(ceiling.bytes, configuration.maxBatchBytes))
    }

    mutating func readCompleted(_ batches: [SyncBatch], now: Duration) -> [Action] {
        guard case .reading = phase, let last = batches.last else { return [] }
        if batches.count == 1 && last.records.isEmpty && last.end <= stats.committed {
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
        writtenEnd = max(writtenEnd, last.end)
        stats.pending = pending
        queue.insert(contentsOf: batches, at: 0)
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

    mutating func uploadCompleted(slot: Int, _ outcome: UploadOutcome, bytes: Int, now: Duration, jitter: Double) -> [Action] {
        guard case .uploading(var round) = phase else { return [] }
        let index = slot - round.firstSlot
        guard round.answers.indices.contains(index), round.answers[index] == nil else { return [] }
        round.answers[index] = (outcome, bytes)
        guard round.answers.allSatisfy({ $0 != nil }) else {
            phase = .uploading(round)
            return []
        }
        return roundFinished(round, now: now, jitter: jitter)
    }

    /// Every request of the round is answered: each batch goes back to the queue's head with
    /// its answer, in seq order, and ``nextStep(now:)`` commits the accepted prefix. Up to the
    /// first batch to retry, that is: it and everything after it are dropped, to be read again
    /// after the backoff (the accepted ones among them are sent again, with the same ids).
    private mutating func roundFinished(_ round: Round, now: Duration, jitter: Double) -> [Action] {
        if let error = round.answers.lazy.compactMap({ answer -> SyncError? in
            if case .fatal(let error) = answer?.outcome { error } else { nil }
        }).first {
            count(error)
            return stop(failure: error)
        }
        var answered: [SyncBatch] = []
        var retry: SyncError?
        var overloaded = false
        var tooLarge = false
        for (batch, answer) in zip(round.batches, round.answers.map { $0! }) {
            var batch = batch
            switch answer.outcome {
            case .accepted:
                batch.answer = .accepted(bytes: answer.bytes)
                acceptedUnderCeiling += 1
            case .retry(let error):
                count(error)
                stats.retries += 1
                overloaded = overloaded || error.meansOverload
                if retry == nil {
                    retry = error
                    // Batches accepted before it are progress: the backoff starts over, as it
                    // does with one request in flight after an accepted batch.
                    if answered.contains(where: { if case .accepted = $0.answer { true } else { false } }) {
                        consecutiveFailures = 0
                    }
                    batch.answer = .failed(error, until: backOff(after: error, now: now, jitter: jitter))
                    answered.append(batch)
                }
                continue
            case .fatal:
                preconditionFailure("a round with a fatal answer stops before this loop")
            case .tooLarge(let error), .rejected(let error):
                count(error)
                if case .tooLarge = answer.outcome {
                    tooLarge = true
                    lowerCeiling(below: batch)
                }
                if batch.records.count > 1 {
                    // Bisect: the halves go first, so a poison record ends up alone and the rest still arrive.
                    let (first, second) = batch.split()
                    stats.splits += 1
                    if retry == nil { answered += [first, second] }
                    continue
                }
                batch.answer = .refused(error)
            }
            if retry == nil { answered.append(batch) }
        }
        if retry == nil {
            consecutiveFailures = 0
            // Accepted answers clear the failure state; with a retry in the round they do not,
            // so its backoff and `Retry-After` stand.
            if answered.contains(where: { if case .accepted = $0.answer { true } else { false } }) {
                backoffUntil = nil
                serverWait = nil
            }
            if !tooLarge { raiseCeiling() }
            queue.insert(contentsOf: answered, at: 0)
        } else {
            queue = answered
        }
        concurrency.roundFinished(used: round.batches.count, roundTrip: now - round.started, overloaded: overloaded)
        stats.concurrency = concurrency.limit
        stats.peakConcurrency = concurrency.peak
        phase = .idle
        return nextStep(now: now)
    }

    /// A 413: batches from now on hold at most half of the refused one, so later batches do not
    /// walk the same chain of 413s again.
    private mutating func lowerCeiling(below batch: SyncBatch) {
        let (count, bytes) = batchLimits
        ceiling = (min(count, max(1, batch.records.count / 2)), min(bytes, max(1, batch.payloadBytes / 2)))
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
    private mutating func refuse(_ batch: SyncBatch, _ error: SyncError) -> [Action] {
        let log = Action.logRefusal(error, records: batch.records.count)
        guard configuration.deadLetterEnabled else {
            phase = .committing(end: batch.end, .deadLettered(records: batch.records.count))
            return [log, .commit(upTo: batch.end)]
        }
        phase = .deadLettering(batch)
        return [log, .deadLetter(batch.records, error)]
    }

    mutating func deadLetterCompleted() -> [Action] {
        guard case .deadLettering(let batch) = phase else { return [] }
        phase = .committing(end: batch.end, .deadLettered(records: batch.records.count))
        return [.commit(upTo: batch.end)]
    }

    mutating func commitCompleted(now: Duration) -> [Action] {
        guard case .committing(let end, let kind) = phase else { return [] }
        stats.committed = max(stats.committed, end)
        stats.pending = pending
        var actions: [Action] = []
        switch kind {
        case .delivered(let batches, let records, let bytes):
            stats.batches += batches
            stats.records += records
            stats.bytes += bytes
            for index in waiters.indices {
                waiters[index].report.batches += batches
                waiters[index].report.records += records
                waiters[index].report.bytes += bytes
                // Retries count per upload: a delivered batch gives the next one the full allowance.
                waiters[index].retriesLeft = waiters[index].retries
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
        phase = .idle
        return actions + nextStep(now: now)
    }
}

// MARK: - Failures

extension SyncStateMachine {
    /// When the retry of a request that failed with `error` may start: after the backoff, and
    /// never before the server's `Retry-After` (capped at `backoff.maxRetryAfter`).
    private mutating func backOff(after error: SyncError, now: Duration, jitter: Double) -> Duration {
        consecutiveFailures += 1
        if let retryAfter = error.retryAfter {
            serverWait = (now + min(max(retryAfter, .zero), configuration.backoff.maxRetryAfter), error)
        }
        return now + configuration.backoff.delay(afterFailures: consecutiveFailures, retryAfter: error.retryAfter, unit: jitter)
    }

    /// A request failed in a way worth retrying, and everything before it is committed: back
    /// off until `until`, and retry (reading the batch again) if anybody still wants the drain.
    mutating func retryableFailure(_ error: SyncError, until: Duration, now: Duration) -> [Action] {
        backoffUntil = until
        // The retry reads again from the committed offset rather than re-sending this batch
        // from memory: records that expired (`maxAge`, `reportingDeadline`) or were dropped
        // by the cap during the backoff are then skipped and counted, never uploaded. Queued
        // batches go too; the read makes the same batches again, in the same order.
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
