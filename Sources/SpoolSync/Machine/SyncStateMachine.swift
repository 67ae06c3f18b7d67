import Spool

/// The sync policies as a pure state machine: events in, actions out.
///
/// No I/O, no clock, no randomness: time arrives with each event as a `Duration` since the
/// driver started, and so does a random draw for the backoff's jitter. ``SyncWorker`` carries
/// the actions out and feeds their results back as events.
///
/// The batches read and not yet committed form a ``Window``, in seq order. Up to the
/// ``ConcurrencyController``'s limit of requests are in flight at once, answered in any order;
/// a slot freed by an answer is refilled at once with the next batch. The offset moves through
/// the longest prefix of batches settled (accepted, or refused and dead-lettered), never past
/// one in flight, failed or being retried, so it only moves forward and never over a record
/// the server has not acknowledged. One local operation runs at a time beside the requests: a
/// read, a commit, a dead-letter write or a damage record.
///
/// The window holds at most ``SyncConfiguration/maxWindowBytes`` of payload (and always at
/// least one batch): when a slow or failing batch at its head holds the commit back and
/// that much waits behind it, nothing more is read or sent; the requests in flight go on,
/// and sending resumes as soon as the head is settled and committed.
///
/// A *drain* reads batches, uploads them, commits them, and goes on while someone wants it to:
/// a ``SyncWorker/flush(deadline:retries:)`` caller waiting for it, or the worker running
/// (started and not paused). It ends when a read finds nothing, at a failure, or when
/// nobody wants more. Where the machine is in all this is one value, ``lifecycle``.
///
/// Every field is read freely but written only by the machine's own operations, in this file.
package struct SyncStateMachine: Sendable {
    package private(set) var configuration: SyncConfiguration
    package private(set) var lifecycle: Lifecycle = .live(.notStarted, .idle(retryOwed: false))
    package private(set) var stats = SyncStats()
    package private(set) var window = Window()
    /// The local operation in flight, if any.
    package private(set) var local: Local?
    private(set) var flushes = Flushes()
    private(set) var setbacks = Setbacks()
    private(set) var ceiling = BatchCeiling()
    /// How many requests may be in flight.
    package private(set) var concurrency: ConcurrencyController
    /// When the frontier's request is sent once more, within a budget.
    private(set) var hedging: Hedging
    /// Whether a failed batch is retried on its own or the whole window backs off.
    private var retryBudget: RetryBudget
    /// The damaged ranges recorded for the commit in flight: counted once it completes.
    private var damagePassed: [DamagedRange] = []
    /// With ``SyncConfiguration/DamagePolicy/stop``: the first damaged range read, which the
    /// window stops before. Nothing more is read; once the window before it is committed, the
    /// worker stops.
    private(set) var damageAhead: DamagedRange?
    /// The wake armed for the earliest batch retried on its own or hedge due, if any.
    private var wakeAt: Duration?
    /// The end of the records the log wrote, as far as the machine knows.
    private(set) var writtenEnd: UInt64 = 0
    /// `writtenEnd` when the last read started: a larger `writtenEnd` after it means writes
    /// were noticed while the read ran.
    private var writtenEndAtRead: UInt64 = 0
    /// The interval timer's generation: a fire of an older one is ignored.
    private(set) var timerGeneration = 0
    /// The backoff's generation: an expiry of an older one is ignored.
    private var backoffGeneration = 0

    /// - Parameters:
    ///   - committed: the consumer's committed offset.
    ///   - pending: records written and not yet committed.
    package init(configuration: SyncConfiguration, committed: UInt64, pending: UInt64) {
        self.configuration = configuration
        concurrency = ConcurrencyController(configuration.concurrency)
        hedging = Hedging(enabled: configuration.hedging && configuration.concurrency.maximum > 1)
        retryBudget = RetryBudget(inFlight: configuration.concurrency.maximum)
        noteConcurrency()
        stats.peakInFlight = 0
        stats.committed = committed
        stats.pending = pending
        writtenEnd = committed + pending
    }

    /// Handles one event.
    ///
    /// - Parameters:
    ///   - event: what happened.
    ///   - now: the time, since the driver started.
    ///   - jitter: a uniform random draw in `0 ..< 1`, used if the event leads to a backoff.
    /// - Returns: what the driver must do, in order.
    package mutating func handle(_ event: Event, now: Duration, jitter: Double) -> [Action] {
        if isStopped {
            if case .flushRequested(let id, _, _, _) = event {
                var report = FlushReport()
                report.failure = SyncError(.stopped, "the sync worker is stopped")
                return [.finishFlush(id: id, report)]
            }
            return []
        }
        switch event {
        case .start: return start(now: now)
        case .stop: return halt(SyncError(.stopped, "the sync worker was stopped during the flush"))
        case .pause: return pause()
        case .resume: return resume(now: now)
        case .setFlushInterval(let interval): return setFlushInterval(interval, now: now)
        case .recordsWritten(let end): return recordsWritten(end: end, now: now)
        case .timerFired(let generation): return timerFired(generation: generation, now: now)
        case .backoffExpired(let generation): return backoffExpired(generation: generation, now: now)
        case .wake:
            wakeAt = nil
            return pump(now: now)
        case .flushRequested(let id, let deadline, let retries, let through):
            let waiter = Waiter(id: id, deadline: deadline, retries: max(retries, 0), through: through)
            return flushRequested(waiter, now: now)
        case .flushDeadlinePassed(let id): return flushDeadlinePassed(id: id)
        case .readCompleted(let batch): return readCompleted(batch, now: now)
        case .uploadCompleted(let slot, let outcome, let bytes, let declaredCapacity):
            return uploadCompleted(slot: slot, outcome, bytes: bytes, declaredCapacity: declaredCapacity, now: now, jitter: jitter)
        case .deadLetterCompleted: return deadLetterCompleted(now: now)
        case .damageRecorded: return damageRecorded()
        case .commitCompleted: return commitCompleted(now: now)
        case .readFailed(let error), .deadLetterFailed(let error), .commitFailed(let error), .damageRecordFailed(let error):
            return haltingFailure(error, now: now, jitter: jitter)
        }
    }
}

// MARK: - The lifecycle's transitions

extension SyncStateMachine {
    /// Moves the drain to `drain`, the worker as it is.
    private mutating func enter(_ drain: Drain) {
        guard case .live(let worker, _) = lifecycle else { return }
        lifecycle = .live(worker, drain)
    }

    /// Records whether a retry is owed, wherever the drain is.
    private mutating func oweRetry(_ owed: Bool) {
        guard case .live(_, let drain) = lifecycle else { return }
        switch drain {
        case .idle: enter(.idle(retryOwed: owed))
        case .draining(let caughtUp, _): enter(.draining(caughtUp: caughtUp, retryOwed: owed))
        case .backingOff(let until, _): enter(.backingOff(until: until, retryOwed: owed))
        }
    }

    /// Records whether the drain's last read found nothing past the window.
    private mutating func setCaughtUp(_ caughtUp: Bool) {
        guard case .live(_, .draining(_, let owed)) = lifecycle else { return }
        enter(.draining(caughtUp: caughtUp, retryOwed: owed))
    }

    /// Backs off until `until`: a ``Event/backoffExpired(generation:)`` of this generation
    /// ends it.
    private mutating func backOff(until: Duration) -> Action {
        backoffGeneration += 1
        enter(.backingOff(until: until, retryOwed: retryOwed))
        return .backoff(until: until, generation: backoffGeneration)
    }

    /// Stops for good: nothing more is read, sent or committed (the operation in flight ends
    /// by itself), and every waiting flush ends with `error`.
    private mutating func halt(_ error: SyncError) -> [Action] {
        lifecycle = .stopped
        window.removeAllBatches()
        return [.cancelTimer] + failWaiters(error, notify: error.code != .stopped)
    }

    /// The drain is over (nobody wants more, or a failure ended it): idle, and the batches'
    /// failures are forgotten, so that the next flush has its whole `retries` allowance. A
    /// drain that backs off and goes on keeps them.
    private mutating func endDrain() {
        enter(.idle(retryOwed: retryOwed))
        window.forgetAttempts()
    }

    /// Starts a drain (from idle, or when a backoff ends), or goes on with the one running.
    private mutating func nextStep(now: Duration) -> [Action] {
        guard !isStopped else { return [] }
        if !isDraining { enter(.draining(caughtUp: false, retryOwed: retryOwed)) }
        return pump(now: now)
    }
}

// MARK: - Lifecycle and triggers

extension SyncStateMachine {
    private mutating func start(now: Duration) -> [Action] {
        guard case .live(.notStarted, let drain) = lifecycle else { return [] }
        lifecycle = .live(.running, drain)
        // Send on launch: whatever a previous run left goes out at once.
        return armTimer(now: now) + (pending > 0 && isIdle ? nextStep(now: now) : [])
    }

    private mutating func pause() -> [Action] {
        guard case .live(.running, let drain) = lifecycle else { return [] }
        lifecycle = .live(.paused, drain)
        timerGeneration += 1
        return [.cancelTimer]
    }

    private mutating func resume(now: Duration) -> [Action] {
        guard case .live(.paused, let drain) = lifecycle else { return [] }
        lifecycle = .live(.running, drain)
        var actions = armTimer(now: now)
        if isDraining { return actions + pump(now: now) }
        guard isIdle else { return actions }
        if retryOwed, let until = setbacks.automaticWait(now) {
            actions.append(backOff(until: until))
        } else if retryOwed || pending >= UInt64(configuration.flushCount) {
            actions += nextStep(now: now)
        }
        return actions
    }

    private mutating func setFlushInterval(_ interval: Duration, now: Duration) -> [Action] {
        configuration.flushInterval = interval
        guard isRunning else { return [] }
        // Sensors Analytics' rule: a new interval flushes at once, then restarts the timer.
        return armTimer(now: now) + (isIdle && pending > 0 ? nextStep(now: now) : [])
    }

    private mutating func recordsWritten(end: UInt64, now: Duration) -> [Action] {
        writtenEnd = max(writtenEnd, end)
        stats.pending = pending
        if caughtUp, end > windowEnd {
            // The drain had read everything: there is more now.
            setCaughtUp(false)
            return nextStep(now: now)
        }
        guard isRunning, isIdle, !setbacks.holdsAutomatic(now), pending >= UInt64(configuration.flushCount) else { return [] }
        return nextStep(now: now)
    }

    private mutating func timerFired(generation: Int, now: Duration) -> [Action] {
        guard generation == timerGeneration, isRunning else { return [] }
        return armTimer(now: now) + (isIdle && !setbacks.holdsAutomatic(now) && pending > 0 ? nextStep(now: now) : [])
    }

    private mutating func backoffExpired(generation: Int, now: Duration) -> [Action] {
        guard generation == backoffGeneration, case .live(_, .backingOff(_, let owed)) = lifecycle else { return [] }
        enter(.idle(retryOwed: owed))
        return nextStep(now: now)
    }

    /// A flush starts at once, even during a backoff of Spool's own; it joins a drain in
    /// progress. The server's `Retry-After` binds it, though: it waits for that time (not for
    /// the rest of a longer, jittered backoff), or ends at once with the server's error when
    /// its deadline comes first.
    private mutating func flushRequested(_ waiter: Waiter, now: Duration) -> [Action] {
        let wait = setbacks.serverWait(now)
        if let wait, let deadline = waiter.deadline, wait.until + minimumRequestTime > deadline {
            var report = waiter.report
            report.failure = wait.error
            return [.finishFlush(id: waiter.id, report)]
        }
        if let through = waiter.through, through <= stats.committed {
            return [.finishFlush(id: waiter.id, waiter.report)]
        }
        flushes.add(waiter)
        let wake: [Action] = waiter.deadline.map { [.scheduleDeadline(id: waiter.id, at: $0)] } ?? []
        guard case .live(_, let drain) = lifecycle else { return wake }
        switch drain {
        case .idle, .backingOff:
            if let wait {
                if case .backingOff(let until, _) = drain, until <= wait.until { return wake }
                return wake + [backOff(until: wait.until)]
            }
            if case .backingOff(_, let owed) = drain {
                backoffGeneration += 1
                enter(.idle(retryOwed: owed))
            }
            return wake + nextStep(now: now)
        case .draining:
            return wake + nextStep(now: now)  // joins the drain in progress
        }
    }

    /// A flush's deadline came while it was still waiting (for requests in flight, a read, a
    /// commit or a backoff): it is answered now. The operation in flight goes on, and what it
    /// delivers is committed and counted in ``stats``, not in this flush's report.
    private mutating func flushDeadlinePassed(id: Int) -> [Action] {
        guard var report = flushes.remove(id: id)?.report else { return [] }
        report.deadlineReached = true
        return [.finishFlush(id: id, report)]
    }

    /// Re-arms the interval timer if periodic flushing applies, else cancels it.
    private mutating func armTimer(now: Duration) -> [Action] {
        timerGeneration += 1
        guard isRunning, let interval = configuration.effectiveFlushInterval else { return [.cancelTimer] }
        return [.scheduleTimer(at: now + interval, generation: timerGeneration)]
    }
}

// MARK: - The drain: read, send through the window, commit, and again

extension SyncStateMachine {
    /// Inside a drain, after every event: settles the window's head, fills the free slots,
    /// reads when few batches are left to send, and ends the drain when nobody wants more.
    /// This is where deadlines are checked, before new requests.
    ///
    /// The head decides the local step: accepted batches are committed (all of a run at
    /// once), a refused record is dead-lettered, a failure backs off, an empty batch (a
    /// skipped range) is committed. Unsent batches go out, in seq order, while a slot is free.
    private mutating func pump(now: Duration) -> [Action] {
        guard isDraining else { return [] }
        var actions: [Action] = []
        if local == nil, let head = window.batches.first {
            if let answer = head.answer {
                // What the server answered is settled first, whoever still wants the drain: an
                // accepted batch is committed even while paused, as a single request always was.
                actions += settle(answer, now: now)
                guard isDraining else { return actions }
            } else if head.records.isEmpty {
                if let violation = Window.contiguityViolation([head], from: stats.committed) { return internalFailure(violation) }
                _ = window.removeFirst()
                actions += commit(upTo: head.end, .skipped, passing: head.damage)
            }
        }
        if local == nil, window.isEmpty, let damage = damageAhead { return actions + stop(before: damage) }
        let minimum = minimumRequestTime
        if flushes.waiting.contains(where: { $0.deadline.map { $0 - now < minimum } ?? false }) {
            switch local {
            case .committing?, .deadLettering?, .recordingDamage?: return actions  // answered once it is counted
            case .reading?, nil: break
            }
            for waiter in flushes.end(where: { $0.deadline.map { $0 - now < minimum } ?? false }) {
                var report = waiter.report
                report.deadlineReached = true
                actions.append(.finishFlush(id: waiter.id, report))
            }
        }
        guard wanted else {
            if local == nil && window.batches.allSatisfy({ $0.slot == nil }) {
                // Nothing more to wait for: what was read and not sent is read again next time.
                dropWindow(after: -1)
                endDrain()
            }
            return actions
        }
        oweRetry(false)
        let timeout = requestTimeout(now: now)
        let sendable = window.failedIndex ?? window.batches.endIndex
        // A hedge first: it frees the frontier, which everything answered behind it waits for.
        if window.inFlight < concurrency.limit, let index = window.frontier, let due = hedgeDue(at: index), due <= now {
            actions.append(hedge(at: index, timeout: timeout, now: now))
        }
        while window.inFlight < concurrency.limit, let index = window.batches[..<sendable].firstIndex(where: { $0.isDue(now) }) {
            actions.append(send(at: index, timeout: timeout, now: now))
        }
        actions += armWake(now: now)
        guard !halted, local == nil, damageAhead == nil,
              window.isEmpty || (!caughtUp && window.batches.count(where: { $0.isDue(now) }) < concurrency.limit) else {
            return actions
        }
        // The window's bound: a read only with room for a whole batch (always, when the window
        // is empty), and never more than the room left.
        let (count, bytes) = batchLimits
        let held = window.held
        let room = window.isEmpty ? Int.max : configuration.maxWindowBytes - held.bytes
        guard room >= bytes else { return actions }
        let batches = min(2 * concurrency.limit, room / bytes)
        local = .reading(from: windowEnd)
        writtenEndAtRead = writtenEnd
        actions.append(.read(from: windowEnd, count: held.records + count * batches, bytes: held.bytes + min(room, bytes * batches),
                             batches: batches, maxCount: count, maxBytes: bytes))
        return actions
    }

    /// Asks for a wake at the earliest time a batch retried on its own is due, or the
    /// frontier's request may be hedged, unless one as early is armed.
    private mutating func armWake(now: Duration) -> [Action] {
        let hedgeAt = window.frontier.flatMap { hedgeDue(at: $0) }
        guard let next = (window.retryTimes + [hedgeAt].compactMap { $0 }).filter({ $0 > now }).min(),
              wakeAt.map({ next < $0 }) ?? true else { return [] }
        wakeAt = next
        return [.scheduleWake(at: next)]
    }

    /// Sends a second copy of the request of the batch at `index` (in flight) in the next slot.
    ///
    /// The controller is not told: it sees each batch's request once, sent with the first copy
    /// and answered by the first copy accepted (or by the first copy's failure), so a hedge
    /// neither grows the limit twice nor shortens the round trips it averages. The copy does
    /// take a slot: the limit bounds the connections a destination sees, hedges included.
    private mutating func hedge(at index: Int, timeout: Duration, now: Duration) -> Action {
        let slot = window.hedge(at: index, now: now)
        hedging.hedgeSent()
        stats.requests += 1
        stats.hedges += 1
        stats.peakInFlight = max(stats.peakInFlight, window.inFlight)
        return .upload(window.batches[index], slot: slot, timeout: timeout)
    }

    /// Sends the unsent batch at `index` in the next slot.
    private mutating func send(at index: Int, timeout: Duration, now: Duration) -> Action {
        let (slot, retried) = window.send(at: index, now: now)
        if retried { stats.retries += 1 }
        stats.requests += 1
        hedging.requestSent()
        // The first request after a failure sends its batch again: every failure since is retried.
        stats.retries += setbacks.requestSent()
        let inFlight = window.inFlight
        stats.peakInFlight = max(stats.peakInFlight, inFlight)
        concurrency.sent(inFlight: inFlight, now: now)
        return .upload(window.batches[index], slot: slot, timeout: timeout)
    }

    /// The window's head was answered: commit the run of accepted batches it starts,
    /// dead-letter a refused record, or back off for a failure.
    private mutating func settle(_ answer: SyncBatch.Answer, now: Duration) -> [Action] {
        if let violation = Window.contiguityViolation(window.batches, from: stats.committed) {
            return internalFailure(violation)
        }
        switch answer {
        case .failed(let error, let until):
            return retryableFailure(error, until: until, now: now)
        case .refused(let error):
            return refuse(window.removeFirst(), error)
        case .accepted:
            var delivered = (batches: 0, records: 0, bytes: 0)
            var end = stats.committed
            var damage: [DamagedRange] = []
            while case .accepted(let bytes) = window.batches.first?.answer {
                let batch = window.removeFirst()
                delivered = (delivered.batches + 1, delivered.records + batch.records.count, delivered.bytes + bytes)
                end = batch.end
                damage += batch.damage
            }
            return commit(upTo: end, .delivered(batches: delivered.batches, records: delivered.records, bytes: delivered.bytes), passing: damage)
        }
    }

    /// ``SyncConfiguration/DamagePolicy/stop``: the window before the damaged range is
    /// committed, and the worker stops there with ``SyncError/Code/damaged``.
    private mutating func stop(before damage: DamagedRange) -> [Action] {
        let error = SyncError(.damaged, "records \(damage.seqs.lowerBound)..<\(damage.seqs.upperBound) (\(damage.records)) cannot be read: \(damage.reason); stopped before them (on damage: stop), committed through \(stats.committed)")
        count(error)
        stats.fatalError = error
        return halt(error) + [.shutDown]
    }

    /// The machine found its own invariant broken: stop before committing anything, with an
    /// error that names the offsets (never payloads).
    private mutating func internalFailure(_ violation: String) -> [Action] {
        let error = SyncError(.internalError, "the sync worker stopped on a broken invariant: \(violation); nothing past the committed offset \(stats.committed) was committed")
        count(error)
        stats.fatalError = error
        local = nil
        return halt(error) + [.shutDown]
    }

    private mutating func readCompleted(_ batches: [SyncBatch], now: Duration) -> [Action] {
        guard case .reading(let from) = local else { return [] }
        local = nil
        guard from == windowEnd else {
            // The window was cut while the read ran (a 413 dropped its unsent tail to cut it
            // again smaller, or a failure dropped what followed it): these batches start past
            // its end now. Appending them would leave a gap that the next commit passes.
            // They are read again from the window's new end.
            return pump(now: now)
        }
        if let violation = Window.contiguityViolation(batches, from: from) { return internalFailure(violation) }
        var batches = batches
        if let limit = readLimit {
            // A flush that waits for an offset gets nothing written after it; a range skipped
            // (dropped, expired) up to the offset is still committed, so that the consumer
            // does reach it.
            batches = batches.compactMap { batch in
                guard batch.start < limit else { return nil }
                return batch.end > limit ? batch.prefix(before: limit) : batch
            }
        }
        if configuration.onDamage == .stop, let damage = batches.lazy.flatMap(\.damage).first {
            // Nothing at or past the damage is added: the window stops before it.
            let limit = damage.seqs.lowerBound
            batches = batches.compactMap { batch in
                guard batch.start < limit else { return nil }
                return batch.end > limit ? batch.prefix(before: limit) : batch
            }
            damageAhead = damage
        }
        batches.removeAll { $0.records.isEmpty && $0.end <= windowEnd }
        if batches.isEmpty, window.isEmpty, let damage = damageAhead { return stop(before: damage) }
        guard let last = batches.last else {
            guard window.isEmpty else {
                setCaughtUp(true)
                return pump(now: now)
            }
            // Nothing to read: the drain is done. `writtenEnd` stays: a write noticed while
            // this read ran may be past what it saw, and the next timer tick must still see it.
            stats.pending = pending
            endDrain()
            let ended = flushes.end { _ in true }
            var actions: [Action] = ended.isEmpty ? [] : [.notify(ids: ended.map(\.id), .noData)]
            actions += ended.map { .finishFlush(id: $0.id, $0.report) }
            return actions + countTriggerMissedDuringRead(now: now)
        }
        setCaughtUp(false)
        writtenEnd = max(writtenEnd, last.end)
        stats.pending = pending
        window.append(batches)
        return pump(now: now)
    }

    /// After a read that found nothing: the count trigger that writes noticed during the read
    /// could not fire (the machine was busy), fired now. Without it, with periodic flushing
    /// off, those records would wait for the next write. Only writes noticed during the read
    /// count, so a pending count the log cannot deliver yet never makes the drain spin.
    private mutating func countTriggerMissedDuringRead(now: Duration) -> [Action] {
        guard writtenEnd > writtenEndAtRead, isRunning, !setbacks.holdsAutomatic(now), pending >= UInt64(configuration.flushCount) else {
            return []
        }
        return nextStep(now: now)
    }
}

// MARK: - Answers: each request's outcome, as it comes

extension SyncStateMachine {
    /// The request in `slot` was answered: the answer is kept on its batch (committed once
    /// everything before it is settled), the controller learns its round trip (and what the
    /// destination said of its capacity), and the free slot is refilled at once.
    private mutating func uploadCompleted(
        slot: Int, _ outcome: SinkOutcome, bytes: Int, declaredCapacity: Int?, now: Duration, jitter: Double
    ) -> [Action] {
        concurrency.destinationDeclared(capacity: declaredCapacity)
        noteLateRequests(now: now)
        switch window.answered(slot: slot) {
        case .retired:
            // A copy no longer needed: its batch is settled (or gone), whatever it says now.
            return pump(now: now)
        case .unknown:
            return []
        case .abandoned(let request, let wasLate):
            // Its batch left the window behind a failure; the answer still tells of the server,
            // and a failure still counts against the range's retries.
            var actions: [Action] = []
            if case .retry(let error) = outcome {
                count(error)
                setbacks.abandonedRequestFailed()
                let failures = window.abandonedRequestFailed(request.range)
                actions = failWaiters(error, notify: true) { $0.retries < failures }
            }
            learn(outcome, roundTrip: now - request.sent, wasLate: wasLate, now: now)
            return actions + pump(now: now)
        case .hedge(let index):
            return hedgeAnswered(at: index, outcome, bytes: bytes, now: now, jitter: jitter)
        case .first(let index, let sent, let wasLate):
            if case .accepted = outcome { hedging.measured(now - sent) }
            return answered(at: index, outcome, bytes: bytes, sent: sent, wasLate: wasLate, now: now, jitter: jitter)
        }
    }

    /// The hedge of the batch at `index` was answered. Accepted, it settles the batch (the
    /// first copy runs on, and its answer, whatever it says, is ignored); a fatal answer
    /// stops the worker as any does. Any other failure is forgotten (counted in ``stats``
    /// only): the first copy, still in flight, carries the batch as it did before the hedge.
    private mutating func hedgeAnswered(at index: Int, _ outcome: SinkOutcome, bytes: Int, now: Duration, jitter: Double) -> [Action] {
        var settles = false
        if case .accepted = outcome { settles = true }
        guard let copies = window.hedgeAnswered(at: index, settles: settles) else { return [] }
        switch outcome {
        case .accepted:
            hedging.measured(now - copies.hedgeSent)
            // The controller learns of the batch's request once: accepted now, as sent with
            // the first copy (late if that one was reported late).
            return answered(at: index, outcome, bytes: bytes, sent: copies.firstSent, wasLate: copies.wasLate, now: now, jitter: jitter)
        case .fatal:
            return answered(at: index, outcome, bytes: bytes, sent: copies.firstSent, wasLate: false, now: now, jitter: jitter)
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
        let batch = window.batches[index]
        switch outcome {
        case .accepted:
            window.settle(at: index, .accepted(bytes: bytes))
            retryBudget.accepted()
            setbacks.accepted(clears: !halted)
            ceiling.accepted(configured: configuredLimits)
        case .retry(let error):
            count(error)
            retryBudget.failed()
            // One count of failures per batch, whatever retries it (on its own, after a
            // go-back, as the halves of a split): a flush allowing fewer retries ends before
            // the batch is sent again.
            let failures = window.failed(at: index)
            if let alone = retryAlone(at: index, failures: failures, error, now: now, jitter: jitter) { return alone + pump(now: now) }
            let backoff = setbacks.windowFailed(error, now: now, backoff: configuration.backoff, jitter: jitter)
            // A batch read again must not go sooner than a batch retried on its own was told.
            window.settle(at: index, .failed(error, until: window.retryTimes.reduce(backoff, max)))
            dropWindow(after: index)
        case .tooLarge(let error), .rejected(let error):
            count(error)
            if case .tooLarge = outcome {
                ceiling.lower(below: batch, configured: configuredLimits)
                // Batches read but not sent were cut for the old limits: read them again.
                window.dropUnsentTail(after: index)
                setCaughtUp(false)
                damageAhead = nil
            }
            if batch.records.count > 1 {
                // Bisect: the halves go first, so a poison record ends up alone and the rest still arrive.
                window.split(at: index)
                stats.splits += 1
            } else {
                window.settle(at: index, .refused(error))
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
    /// halts and goes back), the ``RetryBudget`` allows it, and someone still wants the drain
    /// after the flushes that allow fewer retries than the batch's `failures`, or whose
    /// deadline comes first, end with the failure. Nil when it is not: the window halts
    /// behind it and the worker backs off.
    ///
    /// A `Retry-After` on one answer among accepted ones binds its batch (it goes no sooner),
    /// not the window: the requests in flight are not abandoned and sent again, and the
    /// controller weighs it as any overloaded answer. When failures are most of the answers
    /// (the budget is spent), the whole worker waits for the server's `Retry-After`.
    private mutating func retryAlone(at index: Int, failures: Int, _ error: SyncError, now: Duration, jitter: Double) -> [Action]? {
        guard concurrency.maximum > 1, retryBudget.allowsRetry else { return nil }
        let until = now + selectiveDelay(afterFailures: failures, retryAfter: error.retryAfter, jitter: jitter)
        let minimum = minimumRequestTime
        func keeps(_ waiter: Waiter) -> Bool {
            waiter.retries >= failures && (waiter.deadline.map { until + minimum <= $0 } ?? true)
        }
        guard isRunning || flushes.waiting.contains(where: keeps) else { return nil }
        var actions: [Action] = flushes.isEmpty ? [] : [.notify(ids: flushes.ids, .error(error))]
        for waiter in flushes.end(where: { !keeps($0) }) {
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
        }
        window.retry(at: index, notBefore: until)
        return actions
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
        noteConcurrency()
    }

    /// Copies the controller's limit, peak and decreases into ``stats``.
    private mutating func noteConcurrency() {
        stats.concurrency = concurrency.limit
        stats.peakConcurrency = concurrency.peak
        stats.concurrencyDecreases = concurrency.decreases
        stats.declaredCapacity = concurrency.declaredCapacity
    }

    /// Requests in flight past the controller's ``ConcurrencyController/lateAfter`` are
    /// reported, once each: a stall is a sign of strain before it ends. Hedges are not: the
    /// controller sees each batch's request once, through its first copy.
    private mutating func noteLateRequests(now: Duration) {
        guard concurrency.adaptive, let after = concurrency.lateAfter else { return }
        for sent in window.newlyLate(after: after, now: now) {
            concurrency.late(sent: sent, now: now)
        }
        noteConcurrency()
    }

    /// Drops every batch after `index` (after a failure there): those in flight are
    /// abandoned, and all are read again after the retry, with what they went through.
    private mutating func dropWindow(after index: Int) {
        window.drop(after: index)
        setCaughtUp(false)
        damageAhead = nil  // found again when what follows is read again
    }
}

// MARK: - Commits

extension SyncStateMachine {
    /// A lone record the server refuses: dead-letter it (or skip it), then commit past it.
    private mutating func refuse(_ batch: SyncBatch, _ error: SyncError) -> [Action] {
        let log = Action.logRefusal(error, records: batch.records.count)
        guard configuration.deadLetterEnabled else {
            return [log] + commit(upTo: batch.end, .deadLettered(records: batch.records.count), passing: batch.damage)
        }
        local = .deadLettering(batch)
        return [log, .deadLetter(Array(batch.records), error)]
    }

    private mutating func deadLetterCompleted(now: Duration) -> [Action] {
        guard case .deadLettering(let batch) = local else { return [] }
        return commit(upTo: batch.end, .deadLettered(records: batch.records.count), passing: batch.damage)
    }

    /// Commits the consumer to `end`; when that passes damaged ranges, they are recorded first
    /// (every skipped range is recorded before the offset passes it).
    private mutating func commit(upTo end: UInt64, _ kind: CommitKind, passing damage: [DamagedRange]) -> [Action] {
        guard damage.isEmpty else {
            local = .recordingDamage(end: end, kind, damage)
            return [.recordDamage(damage)]
        }
        local = .committing(end: end, kind)
        return [.commit(upTo: end)]
    }

    /// The damaged ranges are recorded: the commit that passes them goes on (they are counted
    /// once it completes).
    private mutating func damageRecorded() -> [Action] {
        guard case .recordingDamage(let end, let kind, let damage) = local else { return [] }
        damagePassed = damage
        local = .committing(end: end, kind)
        return [.commit(upTo: end)]
    }

    private mutating func commitCompleted(now: Duration) -> [Action] {
        guard case .committing(let end, let kind) = local else { return [] }
        local = nil
        stats.committed = max(stats.committed, end)
        stats.pending = pending
        window.committed(through: stats.committed)
        var actions: [Action] = []
        if !damagePassed.isEmpty {
            let damage = damagePassed
            stats.damaged.add(damage)
            flushes.credit { $0.damaged.add(damage) }
            if !flushes.isEmpty { actions.append(.notify(ids: flushes.ids, .damaged(damage))) }
            damagePassed = []
        }
        switch kind {
        case .delivered(let batches, let records, let bytes):
            stats.batches += batches
            stats.records += records
            stats.bytes += bytes
            flushes.credit { report in
                report.batches += batches
                report.records += records
                report.bytes += bytes
            }
            if !flushes.isEmpty {
                actions += Array(repeating: .notify(ids: flushes.ids, .good), count: batches)
            }
        case .deadLettered(let records):
            stats.deadLettered += records
            flushes.credit { $0.deadLettered += records }
            if !flushes.isEmpty { actions.append(.notify(ids: flushes.ids, .good)) }
        case .skipped:
            break
        }
        // A flush that waits for an offset is answered once the consumer is committed that far.
        let committed = stats.committed
        for waiter in flushes.end(where: { $0.through.map { $0 <= committed } ?? false }) {
            actions.append(.finishFlush(id: waiter.id, waiter.report))
        }
        return actions + pump(now: now)
    }
}

// MARK: - Failures

extension SyncStateMachine {
    /// A request failed in a way worth retrying, and everything before it is committed: back
    /// off until `until`, and retry (reading the batch again) if anybody still wants the drain.
    private mutating func retryableFailure(_ error: SyncError, until: Duration, now: Duration) -> [Action] {
        setbacks.holdAutomatic(until: until)
        // The retry reads again from the committed offset rather than re-sending this batch
        // from memory: records that expired (`maxAge`, `reportingDeadline`) or were dropped
        // by the cap during the backoff are then skipped and counted, never uploaded. The
        // window goes too; the read makes the same batches again, in the same order, and they
        // get back the failures they had (the window's attempts). The flushes allowing fewer
        // retries than a batch read again has failed end (the failed one's, or one dropped
        // behind a failure), and those whose deadline comes first.
        dropWindow(after: -1)
        let failures = window.mostFailures
        var actions: [Action] = flushes.isEmpty ? [] : [.notify(ids: flushes.ids, .error(error))]
        let minimum = minimumRequestTime
        actions += failWaiters(error, notify: false) { waiter in
            waiter.retries < failures || !(waiter.deadline.map { until + minimum <= $0 } ?? true)
        }
        oweRetry(true)
        guard wanted else {
            endDrain()
            return actions
        }
        actions.append(backOff(until: until))
        return actions
    }

    /// A read, a commit or a dead-letter write failed: end the drain with the error. Nothing
    /// is retried by itself (no loop, no endless re-upload); the next flush reads again from
    /// the offset on disk, and automatic flushes wait out a backoff first. Requests in flight
    /// are abandoned: their answers are not committed.
    private mutating func haltingFailure(_ error: SyncError, now: Duration, jitter: Double) -> [Action] {
        guard local != nil else { return [] }
        local = nil
        damagePassed = []
        count(error)
        setbacks.localFailed(now: now, backoff: configuration.backoff, jitter: jitter)
        dropWindow(after: -1)
        oweRetry(false)
        endDrain()
        return failWaiters(error, notify: true)
    }

    /// Answers the waiting flushes `ending` picks (every one by default) with `error`, told
    /// through `notify` first when asked, and forgets them.
    private mutating func failWaiters(_ error: SyncError, notify: Bool, where ending: (Waiter) -> Bool = { _ in true }) -> [Action] {
        let ended = flushes.end(where: ending)
        guard !ended.isEmpty else { return [] }
        var actions: [Action] = notify ? [.notify(ids: ended.map(\.id), .error(error))] : []
        for waiter in ended {
            var report = waiter.report
            report.failure = error
            actions.append(.finishFlush(id: waiter.id, report))
        }
        return actions
    }

    private mutating func count(_ error: SyncError) {
        stats.failures[error.code, default: 0] += 1
        stats.lastError = error
    }
}
