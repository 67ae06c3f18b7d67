import Spool

/// The sync policies as a pure state machine: events in, actions out.
///
/// No I/O, no clock, no randomness: time arrives with each event as a `Duration` since the
/// driver started, and so does a random draw for the backoff's jitter. ``SyncWorker`` carries
/// the actions out and feeds their results back as events.
///
/// The batches read and not yet committed form a *window*, in seq order. Up to the
/// ``ConcurrencyController``'s limit of them are in flight at once, answered in any order; a
/// slot freed by an answer is refilled at once with the next batch. The offset moves through
/// the longest prefix of batches settled (accepted, or refused and dead-lettered), never past
/// one in flight, failed or being retried, so it only moves forward and never over a record
/// the server has not acknowledged. One local operation runs at a time beside the requests: a
/// read, a commit or a dead-letter write.
///
/// The window holds at most ``SyncConfiguration/maxWindowBytes`` of payload (and always at
/// least one batch): when a slow or failing batch at its head holds the commit back and
/// that much waits behind it, nothing more is read or sent; the requests in flight go on,
/// and sending resumes as soon as the head is settled and committed.
///
/// A *drain* reads batches, uploads them, commits them, and goes on while someone wants it to:
/// a ``SyncWorker/flush(deadline:retries:)`` caller waiting for it, or the worker running
/// (started and not paused). It ends when a read finds nothing, at a failure, or when
/// nobody wants more.
package struct SyncStateMachine: Sendable {
    package enum Event: Sendable {
        /// The worker started its automatic policies.
        case start
        case stop
        case pause
        case resume
        case setFlushInterval(Duration)
        /// The log wrote records up to (excluding) `end`.
        case recordsWritten(end: UInt64)
        case timerFired(generation: Int)
        case backoffExpired(generation: Int)
        /// The time of a batch retried on its own (see ``Action/scheduleWake(at:)``) has come.
        case wake
        /// A flush: `through`, if set, is the offset the caller waits for (records before it);
        /// it is answered once the consumer is committed that far, whatever is written later.
        case flushRequested(id: Int, deadline: Duration?, retries: Int, through: UInt64? = nil)
        /// The deadline of flush `id` (see ``Action/scheduleDeadline(id:at:)``) has come.
        case flushDeadlinePassed(id: Int)
        /// A read finished, cut into batches in seq order of the records from the `from` it
        /// was asked for (at most the `batches` asked for); a single batch with no records
        /// whose `end` is not past the window's end means nothing more is pending.
        case readCompleted([SyncBatch])
        case readFailed(SyncError)
        /// The request in `slot` finished; `bytes` is the size of the body sent.
        case uploadCompleted(slot: Int, SinkOutcome, bytes: Int)
        case deadLetterCompleted
        case deadLetterFailed(SyncError)
        /// The damaged ranges of ``Action/recordDamage(_:)`` are stored durably.
        case damageRecorded
        case damageRecordFailed(SyncError)
        case commitCompleted
        case commitFailed(SyncError)
    }

    package enum Action: Sendable {
        /// Read up to `count` records and about `bytes` payload bytes from the committed offset
        /// (the window's records again, then new ones: a consumer reads only from its committed
        /// offset); drop the records before `from` and cut the rest into at most `batches`
        /// batches of at most `maxCount` records and `maxBytes` encoded bytes each.
        case read(from: UInt64, count: Int, bytes: Int, batches: Int, maxCount: Int, maxBytes: Int)
        /// Send the batch as the request in `slot` (answered with that slot); it may take
        /// `timeout` (see ``requestTimeout(now:)``). Several may be in flight, two of them for
        /// one batch when it is hedged (``Hedging``): each copy has its own slot.
        case upload(SyncBatch, slot: Int, timeout: Duration)
        /// Write refused records to the dead-letter log (durably), with the refusal: the records
        /// as read from the log (each ``OutgoingRecord/stored``), whatever the sink was sent.
        case deadLetter([Record], SyncError)
        /// Store durably that these ranges of records the log could not read are skipped, and
        /// log them at error level (never payloads): the commit after it passes them.
        case recordDamage([DamagedRange])
        /// Commit the consumer so that `end` is the next record it delivers.
        case commit(upTo: UInt64)
        /// (Re)arm the interval timer; a fire with an older generation is ignored.
        case scheduleTimer(at: Duration, generation: Int)
        case cancelTimer
        /// Wake the drain up at `until` to retry; a wake with an older generation is ignored.
        case backoff(until: Duration, generation: Int)
        /// Send ``Event/wake`` at `at`, replacing any wake armed before (the machine asks again
        /// for any later one it still needs): a failed batch retried on its own is due then.
        case scheduleWake(at: Duration)
        /// Tell the flush callers `ids` how a request went.
        case notify(ids: [Int], BatchResult)
        /// Answer the flush caller `id`.
        case finishFlush(id: Int, FlushReport)
        /// Send ``Event/flushDeadlinePassed(id:)`` at `at`, unless flush `id` is answered
        /// first. A flush that joins a request already in flight (started with the full
        /// `requestTimeout`) is answered at its deadline this way, not when the request ends.
        case scheduleDeadline(id: Int, at: Duration)
        /// Log a refusal (the error, never payloads) as it is dead-lettered.
        case logRefusal(SyncError, records: Int)
        /// The machine stopped by itself (a fatal answer): tear down as ``SyncWorker/stop()``
        /// does.
        case shutDown
    }

    package enum Phase: Sendable {
        /// No drain.
        case idle
        /// A drain is going on: reading, sending, committing, or waiting for answers.
        case draining
        /// A drain waits to retry.
        case backingOff(until: Duration)
        case stopped
    }

    /// The operation running beside the requests: at most one at a time.
    package enum Local: Sendable {
        /// A read from the window's end at the time it was asked (`from`): its batches are
        /// added only if the window still ends there (a 413 or a failure may have cut it since).
        case reading(from: UInt64)
        case committing(end: UInt64, CommitKind)
        case deadLettering(SyncBatch)
        /// Recording the damaged ranges a commit to `end` passes, before it.
        case recordingDamage(end: UInt64, CommitKind, [DamagedRange])
    }

    package enum CommitKind: Sendable {
        /// Batches the server accepted: how many, their records and body bytes.
        case delivered(batches: Int, records: Int, bytes: Int)
        case deadLettered(records: Int)
        case skipped
    }

    struct Waiter: Sendable {
        var id: Int
        var deadline: Duration?
        /// The retries a batch may have while this flush waits: it ends with the failure once
        /// a batch's requests failed more often (``SyncBatch/failures``), whatever path
        /// retried them.
        var retries: Int
        /// The offset this flush waits for, if it does not wait for the end of the log.
        var through: UInt64?
        var report = FlushReport()
    }

    package var configuration: SyncConfiguration
    package var phase: Phase = .idle
    package var stats = SyncStats()
    /// Batches read and not committed, in seq order: unsent, in flight, or answered and
    /// waiting for those before them. A retry reads again.
    package var window: [SyncBatch] = []
    /// The read, commit or dead-letter write in flight, if any.
    package var local: Local?
    /// Requests in flight whose batches left the window (dropped behind a failure): their
    /// answers are ignored (a failure still counts against the range's retries), but they
    /// hold a slot until they come. By slot, with when they were sent and the offsets they carry.
    var abandoned: [Int: (sent: Duration, range: Range<UInt64>)] = [:]
    /// What the requests of ranges that left the window unsettled went through, given back
    /// to their batches when they are read again.
    var attempts = AttemptLedger()
    /// The damaged ranges recorded for the commit in flight: counted once it completes.
    var damagePassed: [DamagedRange] = []
    /// With ``SyncConfiguration/DamagePolicy/stop``: the first damaged range read, which the
    /// window stops before. Nothing more is read; once the window before it is committed, the
    /// worker stops.
    var damageAhead: DamagedRange?
    /// Slots of requests in flight already reported late to the controller.
    var late: Set<Int> = []
    /// Copies of a hedged batch no longer needed (the other copy settled it, or the batch
    /// left the window): they run on and hold a slot until answered, and their answers are
    /// ignored. Never cancelled: a request cancelled while its connection was being made
    /// left the connection, once made, idle in AsyncHTTPClient's pool; a server that serves
    /// one connection at a time (an accept queue of 5) then waited on it, and a drain of 2 s
    /// took 31 s (the other requests' timeout), in 2 of 3 release runs.
    var retired: Set<Int> = []
    /// When the frontier's request is sent once more, within a budget.
    var hedging: Hedging
    /// The last read found nothing past the window: no read until the window changes or the
    /// log grows.
    var caughtUp = false
    /// How many requests may be in flight.
    package var concurrency: ConcurrencyController
    /// Whether a failed batch is retried on its own or the whole window backs off.
    var retryBudget: RetryBudget
    /// The wake armed for the earliest batch retried on its own, if any.
    var wakeAt: Duration?
    /// The next upload slot.
    var nextSlot = 0
    /// After a 413: the largest batch (records, encoded body bytes) this worker sends, until it grows back.
    var ceiling: (count: Int, bytes: Int)?
    /// Batches accepted since the ceiling last changed.
    var acceptedUnderCeiling = 0
    var waiters: [Waiter] = []
    var started = false
    var paused = false
    /// Automatic flushes (timer, count) do not start before this time.
    var backoffUntil: Duration?
    /// The server said when to come back (`Retry-After`, capped at `backoff.maxRetryAfter`):
    /// no request starts before then, not even a manual flush's. Cleared by an accepted batch.
    var serverWait: (until: Duration, error: SyncError)?
    /// A drain was cut short by a retryable failure: the worker retries when it runs.
    var retryOwed = false
    /// Failed requests whose batches are not sent again yet: the next request sent retries
    /// them (counted in ``SyncStats/retries`` then).
    var failuresAwaitingRetry = 0
    var consecutiveFailures = 0
    /// A batch was accepted since the last failure: the next failure starts the backoff over.
    var acceptedSinceFailure = false
    var writtenEnd: UInt64 = 0
    /// `writtenEnd` when the last read started: a larger `writtenEnd` after it means writes
    /// were noticed while the read ran.
    var writtenEndAtRead: UInt64 = 0
    var timerGeneration = 0
    var backoffGeneration = 0

    /// - Parameters:
    ///   - committed: the consumer's committed offset.
    ///   - pending: records written and not yet committed.
    package init(configuration: SyncConfiguration, committed: UInt64, pending: UInt64) {
        self.configuration = configuration
        concurrency = ConcurrencyController(configuration.concurrency)
        hedging = Hedging(enabled: configuration.hedging && configuration.concurrency.maximum > 1)
        retryBudget = RetryBudget(inFlight: configuration.concurrency.maximum)
        stats.concurrency = concurrency.limit
        stats.peakConcurrency = concurrency.peak
        stats.peakInFlight = 0
        stats.committed = committed
        stats.pending = pending
        writtenEnd = committed + pending
    }

    /// Started, not paused, not stopped: the automatic policies apply.
    package var isRunning: Bool { started && !paused && !isStopped }

    package var isStopped: Bool {
        if case .stopped = phase { return true }
        return false
    }

    var isIdle: Bool {
        if case .idle = phase { return true }
        return false
    }

    /// Records written and not yet committed, as far as the machine knows.
    var pending: UInt64 { writtenEnd > stats.committed ? writtenEnd - stats.committed : 0 }

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
        case .stop: return stop()
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
        case .uploadCompleted(let slot, let outcome, let bytes):
            return uploadCompleted(slot: slot, outcome, bytes: bytes, now: now, jitter: jitter)
        case .deadLetterCompleted: return deadLetterCompleted(now: now)
        case .damageRecorded: return damageRecorded()
        case .commitCompleted: return commitCompleted(now: now)
        case .readFailed(let error), .deadLetterFailed(let error), .commitFailed(let error), .damageRecordFailed(let error):
            return haltingFailure(error, now: now, jitter: jitter)
        }
    }
}

// MARK: - Lifecycle and triggers

extension SyncStateMachine {
    private mutating func start(now: Duration) -> [Action] {
        guard !started else { return [] }
        started = true
        // Send on launch: whatever a previous run left goes out at once.
        return armTimer(now: now) + (pending > 0 && isIdle ? nextStep(now: now) : [])
    }

    private mutating func stop() -> [Action] {
        halt(SyncError(.stopped, "the sync worker was stopped during the flush"))
    }

    /// Stops for good: nothing more is read, sent or committed (the operation in flight ends
    /// by itself), and every waiting flush ends with `error`.
    mutating func halt(_ error: SyncError) -> [Action] {
        phase = .stopped
        window.removeAll()
        return [.cancelTimer] + failWaiters(error, notify: error.code != .stopped)
    }

    private mutating func pause() -> [Action] {
        guard started, !paused else { return [] }
        paused = true
        timerGeneration += 1
        return [.cancelTimer]
    }

    private mutating func resume(now: Duration) -> [Action] {
        guard started, paused else { return [] }
        paused = false
        var actions = armTimer(now: now)
        if case .draining = phase { return actions + pump(now: now) }
        guard isIdle else { return actions }
        if retryOwed, let until = backoffUntil, until > now {
            backoffGeneration += 1
            phase = .backingOff(until: until)
            actions.append(.backoff(until: until, generation: backoffGeneration))
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
        if case .draining = phase, caughtUp, end > windowEnd {
            // The drain had read everything: there is more now.
            caughtUp = false
            return nextStep(now: now)
        }
        guard isRunning, isIdle, !inBackoff(now), pending >= UInt64(configuration.flushCount) else { return [] }
        return nextStep(now: now)
    }

    private mutating func timerFired(generation: Int, now: Duration) -> [Action] {
        guard generation == timerGeneration, isRunning else { return [] }
        return armTimer(now: now) + (isIdle && !inBackoff(now) && pending > 0 ? nextStep(now: now) : [])
    }

    private mutating func backoffExpired(generation: Int, now: Duration) -> [Action] {
        guard generation == backoffGeneration, case .backingOff = phase else { return [] }
        phase = .idle
        return nextStep(now: now)
    }

    /// A flush starts at once, even during a backoff of Spool's own; it joins a drain in
    /// progress. The server's `Retry-After` binds it, though: it waits for that time (not for
    /// the rest of a longer, jittered backoff), or ends at once with the server's error when
    /// its deadline comes first.
    private mutating func flushRequested(_ waiter: Waiter, now: Duration) -> [Action] {
        let wait = serverWait.flatMap { $0.until > now ? $0 : nil }
        if let wait, let deadline = waiter.deadline, wait.until + minimumRequestTime > deadline {
            var report = waiter.report
            report.failure = wait.error
            return [.finishFlush(id: waiter.id, report)]
        }
        if let through = waiter.through, through <= stats.committed {
            return [.finishFlush(id: waiter.id, waiter.report)]
        }
        waiters.append(waiter)
        let wake: [Action] = waiter.deadline.map { [.scheduleDeadline(id: waiter.id, at: $0)] } ?? []
        switch phase {
        case .idle, .backingOff:
            if let wait {
                if case .backingOff(let until) = phase, until <= wait.until { return wake }
                backoffGeneration += 1
                phase = .backingOff(until: wait.until)
                return wake + [.backoff(until: wait.until, generation: backoffGeneration)]
            }
            if case .backingOff = phase {
                backoffGeneration += 1
                phase = .idle
            }
            return wake + nextStep(now: now)
        case .draining:
            return wake + nextStep(now: now)  // joins the drain in progress
        case .stopped:
            return wake
        }
    }

    /// A flush's deadline came while it was still waiting (for requests in flight, a read, a
    /// commit or a backoff): it is answered now. The operation in flight goes on, and what it
    /// delivers is committed and counted in ``stats``, not in this flush's report.
    private mutating func flushDeadlinePassed(id: Int) -> [Action] {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return [] }
        var report = waiters.remove(at: index).report
        report.deadlineReached = true
        return [.finishFlush(id: id, report)]
    }

    /// Re-arms the interval timer if periodic flushing applies, else cancels it.
    private mutating func armTimer(now: Duration) -> [Action] {
        timerGeneration += 1
        guard isRunning, let interval = configuration.effectiveFlushInterval else { return [.cancelTimer] }
        return [.scheduleTimer(at: now + interval, generation: timerGeneration)]
    }

    func inBackoff(_ now: Duration) -> Bool {
        if let backoffUntil, backoffUntil > now { return true }
        return false
    }
}
