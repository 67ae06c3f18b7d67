import Spool

// MARK: - The drain: read, send through the window, commit, and again

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

    /// The offset past the window's last batch: where the records of the next read start.
    var windowEnd: UInt64 { window.last?.end ?? stats.committed }

    /// Requests in flight: the window's (with their hedges), those abandoned behind a
    /// failure, and copies no longer needed.
    package var inFlight: Int {
        window.reduce(0) { $0 + ($1.slot == nil ? 0 : 1) + ($1.hedge == nil ? 0 : 1) } + abandoned.count + retired.count
    }

    /// Whether the request in `slot` carries a batch of the window as its first copy, or one
    /// abandoned behind a failure: its failure counts against the batch's retries (a hedge's,
    /// or a copy's no longer needed, does not).
    package func carriesBatch(slot: Int) -> Bool {
        abandoned[slot] != nil || window.contains { $0.slot == slot }
    }

    /// The records and payload bytes the window holds.
    var held: (records: Int, bytes: Int) {
        window.reduce((0, 0)) { ($0.0 + $1.records.count, $0.1 + $1.payloadBytes) }
    }


    /// Where the first failed batch is in the window, if any: nothing after it is sent and
    /// nothing more is read until it reaches the head (batches before it still go out: the
    /// halves of a split, say, which must be settled for it to reach the head at all).
    var failedIndex: Int? { window.firstIndex { if case .failed = $0.answer { true } else { false } } }

    /// A failed batch is in the window.
    var halted: Bool { failedIndex != nil }

    /// Someone wants the drain to go on: a flush waiting, or the worker running.
    var wanted: Bool { isRunning || !waiters.isEmpty }

    /// With only flushes that wait for an offset (`spool sync --once`) and the worker not
    /// running, the furthest of those offsets: nothing at or past it is read.
    var readLimit: UInt64? {
        guard !isRunning, !waiters.isEmpty else { return nil }
        var limit: UInt64 = 0
        for waiter in waiters {
            guard let through = waiter.through else { return nil }
            limit = max(limit, through)
        }
        return limit
    }

    /// The drain is over (nobody wants more, or a failure ended it): idle, and the batches'
    /// failures are forgotten, so that the next flush has its whole `retries` allowance. A
    /// drain that backs off and goes on keeps them.
    mutating func endDrain() {
        phase = .idle
        attempts = AttemptLedger()
    }

    /// Starts a drain (from idle, or when a backoff ends) and moves it on.
    mutating func nextStep(now: Duration) -> [Action] {
        guard !isStopped else { return [] }
        phase = .draining
        return pump(now: now)
    }

    /// Inside a drain, after every event: settles the window's head, fills the free slots,
    /// reads when few batches are left to send, and ends the drain when nobody wants more.
    /// This is where deadlines are checked, before new requests.
    ///
    /// The head decides the local step: accepted batches are committed (all of a run at
    /// once), a refused record is dead-lettered, a failure backs off, an empty batch (a
    /// skipped range) is committed. Unsent batches go out, in seq order, while a slot is free.
    mutating func pump(now: Duration) -> [Action] {
        guard case .draining = phase else { return [] }
        var actions: [Action] = []
        if local == nil, let head = window.first {
            if let answer = head.answer {
                // What the server answered is settled first, whoever still wants the drain: an
                // accepted batch is committed even while paused, as a single request always was.
                actions += settle(answer, now: now)
                guard case .draining = phase else { return actions }
            } else if head.records.isEmpty {
                if let violation = contiguityViolation([head], from: stats.committed) { return internalFailure(violation) }
                window.removeFirst()
                actions += commit(upTo: head.end, .skipped, passing: head.damage)
            }
        }
        if local == nil, window.isEmpty, let damage = damageAhead { return actions + stop(before: damage) }
        let minimum = minimumRequestTime
        if waiters.contains(where: { $0.deadline.map { $0 - now < minimum } ?? false }) {
            if case .committing = local { return actions }  // answered once it is counted
            if case .deadLettering = local { return actions }
            if case .recordingDamage = local { return actions }
            waiters.removeAll { waiter in
                guard let deadline = waiter.deadline, deadline - now < minimum else { return false }
                var report = waiter.report
                report.deadlineReached = true
                actions.append(.finishFlush(id: waiter.id, report))
                return true
            }
        }
        guard wanted else {
            if local == nil && window.allSatisfy({ $0.slot == nil }) {
                // Nothing more to wait for: what was read and not sent is read again next time.
                dropWindow(after: -1)
                endDrain()
            }
            return actions
        }
        retryOwed = false
        let timeout = requestTimeout(now: now)
        let sendable = failedIndex ?? window.endIndex
        // A hedge first: it frees the frontier, which everything answered behind it waits for.
        if inFlight < concurrency.limit, let index = frontier, let due = hedgeDue(at: index), due <= now {
            actions.append(hedge(at: index, timeout: timeout, now: now))
        }
        while inFlight < concurrency.limit, let index = window[..<sendable].firstIndex(where: { $0.isDue(now) }) {
            actions.append(send(at: index, timeout: timeout, now: now))
        }
        actions += armWake(now: now)
        guard !halted, local == nil, damageAhead == nil, window.isEmpty || (!caughtUp && window.count(where: { $0.isDue(now) }) < concurrency.limit) else {
            return actions
        }
        // The window's bound: a read only with room for a whole batch (always, when the window
        // is empty), and never more than the room left.
        let (count, bytes) = batchLimits
        let held = self.held
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
        let hedgeAt = frontier.flatMap { hedgeDue(at: $0) }
        guard let next = (window.compactMap({ $0.isUnsent ? $0.retryAt : nil }) + [hedgeAt].compactMap { $0 }).filter({ $0 > now }).min(),
              wakeAt.map({ next < $0 }) ?? true else { return [] }
        wakeAt = next
        return [.scheduleWake(at: next)]
    }

    /// Where the batch holding the commit frontier is: the first in the window neither
    /// accepted nor refused.
    var frontier: Int? {
        window.firstIndex { batch in
            switch batch.answer {
            case .accepted?, .refused?: false
            case .failed?, nil: true
            }
        }
    }

    /// When the request of the batch at `index` may be hedged: it is in flight, was never
    /// hedged, and ``Hedging`` allows one. Nil when it may not.
    private func hedgeDue(at index: Int) -> Duration? {
        guard case .inFlight(_, let sent) = window[index].state, !window[index].hedged else { return nil }
        return hedging.due(sent: sent)
    }

    /// Sends a second copy of the request of the batch at `index` (in flight) in the next slot.
    ///
    /// The controller is not told: it sees each batch's request once, sent with the first copy
    /// and answered by the first copy accepted (or by the first copy's failure), so a hedge
    /// neither grows the limit twice nor shortens the round trips it averages. The copy does
    /// take a slot: the limit bounds the connections a destination sees, hedges included.
    private mutating func hedge(at index: Int, timeout: Duration, now: Duration) -> Action {
        let slot = nextSlot
        nextSlot += 1
        window[index].hedge = (slot, now)
        window[index].hedged = true
        hedging.hedgeSent()
        stats.requests += 1
        stats.hedges += 1
        stats.peakInFlight = max(stats.peakInFlight, inFlight)
        return .upload(window[index], slot: slot, timeout: timeout)
    }

    /// Sends the unsent batch at `index` in the next slot.
    private mutating func send(at index: Int, timeout: Duration, now: Duration) -> Action {
        let slot = nextSlot
        nextSlot += 1
        window[index].state = .inFlight(slot: slot, sent: now)
        if window[index].retryAt != nil { stats.retries += 1 }
        stats.requests += 1
        hedging.requestSent()
        // The first request after a failure sends its batch again: every failure since is retried.
        stats.retries += failuresAwaitingRetry
        failuresAwaitingRetry = 0
        let inFlight = self.inFlight
        stats.peakInFlight = max(stats.peakInFlight, inFlight)
        concurrency.sent(inFlight: inFlight, now: now)
        return .upload(window[index], slot: slot, timeout: timeout)
    }

    /// The window's head was answered: commit the run of accepted batches it starts,
    /// dead-letter a refused record, or back off for a failure.
    private mutating func settle(_ answer: SyncBatch.Answer, now: Duration) -> [Action] {
        if let violation = contiguityViolation(window, from: stats.committed) {
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
            while case .accepted(let bytes) = window.first?.answer {
                let batch = window.removeFirst()
                delivered = (delivered.batches + 1, delivered.records + batch.records.count, delivered.bytes + bytes)
                end = batch.end
                damage += batch.damage
            }
            return commit(upTo: end, .delivered(batches: delivered.batches, records: delivered.records, bytes: delivered.bytes), passing: damage)
        }
    }

    /// What is wrong, if `batches` are not one contiguous run from `from`: each batch starts
    /// where the one before ends (the first at `from`), and holds only records of its own
    /// range, in seq order. Nil when they are. A run that is not contiguous would commit past
    /// records never sent, so the machine never commits one (``internalFailure(_:)``).
    ///
    /// It runs at every read and every answer, over every record in the window, so it reads
    /// the seqs in place (by index, not through ``SyncBatch/records``, which copies each
    /// record, nor over a generic collection of batches, which copies each batch).
    package func contiguityViolation(_ batches: [SyncBatch], from: UInt64) -> String? {
        var expected = from
        for index in batches.indices {
            let (start, end) = (batches[index].start, batches[index].end)
            guard start == expected else {
                return start > expected
                    ? "records \(expected)..<\(start) are missing from the window (a batch starts at \(start))"
                    : "a batch starts at \(start), inside records already in the window (up to \(expected))"
            }
            var next = start
            for position in batches[index].outgoing.indices {
                let seq = batches[index].outgoing[position].stored.seq
                guard seq >= next, seq < end else {
                    return "record \(seq) is out of its batch's range \(start)..<\(end) or out of order"
                }
                next = seq + 1
            }
            guard end >= start else { return "a batch ends at \(end), before its start \(start)" }
            expected = end
        }
        return nil
    }

    /// ``SyncConfiguration/DamagePolicy/stop``: the window before the damaged range is
    /// committed, and the worker stops there with ``SyncError/Code/damaged``.
    mutating func stop(before damage: DamagedRange) -> [Action] {
        let error = SyncError(.damaged, "records \(damage.seqs.lowerBound)..<\(damage.seqs.upperBound) (\(damage.records)) cannot be read: \(damage.reason); stopped before them (on damage: stop), committed through \(stats.committed)")
        count(error)
        stats.fatalError = error
        return halt(error) + [.shutDown]
    }

    /// The machine found its own invariant broken: stop before committing anything, with an
    /// error that names the offsets (never payloads).
    mutating func internalFailure(_ violation: String) -> [Action] {
        let error = SyncError(.internalError, "the sync worker stopped on a broken invariant: \(violation); nothing past the committed offset \(stats.committed) was committed")
        count(error)
        stats.fatalError = error
        local = nil
        return halt(error) + [.shutDown]
    }

    /// The most records and encoded body bytes of one batch: the configuration's, or less
    /// under a ceiling a 413 set.
    var batchLimits: (count: Int, bytes: Int) {
        guard let ceiling else { return (configuration.maxBatchCount, configuration.maxBatchBytes) }
        return (min(ceiling.count, configuration.maxBatchCount), min(ceiling.bytes, configuration.maxBatchBytes))
    }

    mutating func readCompleted(_ batches: [SyncBatch], now: Duration) -> [Action] {
        guard case .reading(let from) = local else { return [] }
        local = nil
        guard from == windowEnd else {
            // The window was cut while the read ran (a 413 dropped its unsent tail to cut it
            // again smaller, or a failure dropped what followed it): these batches start past
            // its end now. Appending them would leave a gap that the next commit passes.
            // They are read again from the window's new end.
            return pump(now: now)
        }
        if let violation = contiguityViolation(batches, from: from) { return internalFailure(violation) }
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
                caughtUp = true
                return pump(now: now)
            }
            // Nothing to read: the drain is done. `writtenEnd` stays: a write noticed while
            // this read ran may be past what it saw, and the next timer tick must still see it.
            stats.pending = pending
            endDrain()
            let ids = waiters.map(\.id)
            var actions: [Action] = ids.isEmpty ? [] : [.notify(ids: ids, .noData)]
            actions += waiters.map { .finishFlush(id: $0.id, $0.report) }
            waiters.removeAll()
            return actions + countTriggerMissedDuringRead(now: now)
        }
        caughtUp = false
        writtenEnd = max(writtenEnd, last.end)
        stats.pending = pending
        window += batches.map(attempts.restored)
        return pump(now: now)
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
}
