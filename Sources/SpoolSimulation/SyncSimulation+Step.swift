import Spool
import SpoolSync

// MARK: - One step: an event in, the machine's actions carried out, the invariants checked

extension SyncSimulation {
    mutating func send(_ event: SyncStateMachine.Event, _ label: String) throws(Violation) {
        step += 1
        let actions = machine.handle(event, now: now, jitter: random.nextUnit())
        if tracing {
            trace.append("\(step) t=\(now.formatted) \(label) ⇒ \(actions.isEmpty ? "-" : actions.map(Self.describe).joined(separator: "; "))")
        }
        var sent: [(batch: SyncBatch, slot: Int)] = []
        for action in actions {
            if case .upload(let batch, let slot, _) = action { sent.append((batch, slot)) }
            try perform(action)
        }
        try checkRetries(sent)
        try checkInvariants(sent: !sent.isEmpty)
    }

    /// No batch is sent again (hedges aside) for a flush still waiting once one of its records
    /// failed more often than the flush's `retries` since the flush was asked for.
    private func checkRetries(_ sent: [(batch: SyncBatch, slot: Int)]) throws(Violation) {
        for (batch, slot) in sent where machine.window.carriesBatch(slot: slot) {
            for (id, flush) in flushes {
                if let record = batch.records.first(where: { flush.failures[$0.seq, default: 0] > flush.retries }) {
                    throw Violation(message: "record \(record.seq) is sent again for flush \(id) after failing \(flush.failures[record.seq, default: 0]) times, over its \(flush.retries) retries")
                }
            }
        }
    }

    private mutating func perform(_ action: SyncStateMachine.Action) throws(Violation) {
        switch action {
        case .read(let from, let count, let bytes, let batches, let maxCount, let maxBytes):
            try beginLocal(.read(from: from, count: count, bytes: bytes, batches: batches, maxCount: maxCount, maxBytes: maxBytes, readyAt: localTime()))
        case .commit(let end):
            try beginLocal(.commit(end: end, readyAt: localTime()))
        case .recordDamage(let ranges):
            if machine.configuration.onDamage == .stop {
                throw Violation(message: "damaged ranges \(ranges.map(\.seqs)) are recorded to be skipped, with onDamage stop")
            }
            for range in ranges {
                if let wrong = range.seqs.first(where: { !world.damaged.contains($0) || $0 < world.committed }) {
                    throw Violation(message: "record \(wrong) is recorded as damaged and skipped, but it is not damaged or was committed past")
                }
            }
            try beginLocal(.recordDamage(ranges, readyAt: localTime()))
        case .deadLetter(let records, _):
            if let wrong = records.first(where: { !world.refusedAlone.contains($0.seq) }) {
                throw Violation(message: "record \(wrong.seq) is dead-lettered, but the destination never refused it alone")
            }
            try beginLocal(.deadLetter(records, readyAt: localTime()))
        case .upload(let batch, let slot, let timeout):
            guard uploads[slot] == nil else { throw Violation(message: "slot \(slot) is sent while its request is still in flight") }
            guard !batch.records.isEmpty else { throw Violation(message: "an empty batch is sent in slot \(slot)") }
            if let wrong = batch.records.first(where: { world.damaged.contains($0.seq) }) {
                throw Violation(message: "record \(wrong.seq), which the log cannot read, is sent")
            }
            requests += 1
            uploads[slot] = (batch, now + roundTrip(timeout: timeout), now, timeout)
        case .scheduleTimer(let at, let generation):
            timer = (at, generation)
        case .cancelTimer:
            timer = nil
        case .backoff(let until, let generation):
            backoff = (until, generation)
        case .scheduleWake(let at):
            retryWake = at
        case .scheduleDeadline(let id, let at):
            deadlines[id] = at
        case .notify(let ids, _):
            if let unknown = ids.first(where: { flushes[$0] == nil }) {
                throw Violation(message: "flush \(unknown) is told of a request after it was answered")
            }
        case .finishFlush(let id, let report):
            guard let flush = flushes.removeValue(forKey: id) else {
                throw Violation(message: "flush \(id) is answered twice")
            }
            deadlines[id] = nil
            if let deadline = flush.deadline, now > deadline {
                throw Violation(message: "flush \(id) is answered at \(now.formatted), after its deadline \(deadline.formatted)")
            }
            if let through = flush.through, report.failure == nil, !report.deadlineReached, world.committed < through {
                throw Violation(message: "flush \(id) through \(through) reports success with the consumer committed to \(world.committed)")
            }
        case .logRefusal:
            break
        case .shutDown:
            stopped = true
        }
    }

    private mutating func beginLocal(_ pending: Pending) throws(Violation) {
        guard local == nil else { throw Violation(message: "a second local operation starts while one is in flight") }
        local = pending
    }

    /// When a local operation started now finishes: within a few milliseconds, sometimes 100.
    private mutating func localTime() -> Duration {
        now + .microseconds(Int64(random.next() % (random.nextUnit() < 0.1 ? 100_000 : 2_000)))
    }

    /// How long a request takes: the destination's latency, sometimes a slow 1 to 5 s; a
    /// drawn timeout takes the whole `timeout` (and is answered as one).
    private mutating func roundTrip(timeout: Duration) -> Duration {
        if !world.calm && random.nextUnit() < world.destination.timeout { return timeout }
        if !world.calm && random.nextUnit() < world.destination.slow {
            return .milliseconds(Int64(1_000 + random.next() % 4_000))
        }
        let latency = Int64(world.destination.latency / .microseconds(1))
        return .microseconds(1 + Int64(random.next() % UInt64(max(latency, 1))))
    }

    /// The consumer is about to be committed to `end`: it must not move backwards, nor pass a
    /// record the destination did not accept, that was not dead-lettered (or refused and
    /// skipped, with no dead-letter log), or that the log did not drop.
    func checkCommit(to end: UInt64) throws(Violation) {
        guard end >= world.committed else {
            throw Violation(message: "a commit moves the consumer backwards, from \(world.committed) to \(end)")
        }
        let skipsRefused = !machine.configuration.deadLetterEnabled
        for seq in world.committed..<end where !world.accepted.contains(seq) && !world.deadLettered.contains(seq)
            && !world.dropped[Int(seq)] && !(skipsRefused && world.refusedAlone.contains(seq)) {
            if world.damaged.contains(seq) {
                if machine.configuration.onDamage == .stop {
                    throw Violation(message: "a commit to \(end) passes damaged record \(seq), with onDamage stop")
                }
                if world.damageRecorded.contains(seq) { continue }
                throw Violation(message: "a commit to \(end) passes damaged record \(seq) before its range was recorded")
            }
            throw Violation(message: "a commit to \(end) passes record \(seq), which the destination never accepted")
        }
    }

    private func checkInvariants(sent: Bool) throws(Violation) {
        if machine.isStopped {
            guard flushes.isEmpty else { throw Violation(message: "the machine stopped with \(flushes.count) flushes unanswered") }
            return
        }
        guard machine.stats.committed == world.committed else {
            throw Violation(message: "the machine believes the consumer is at \(machine.stats.committed); it is at \(world.committed)")
        }
        if let violation = machine.checkInvariants() {
            throw Violation(message: violation)
        }
        guard (machine.local == nil) == (local == nil) else {
            throw Violation(message: "the machine's local operation and the driver's disagree")
        }
        guard machine.window.inFlight == uploads.count else {
            throw Violation(message: "the machine counts \(machine.window.inFlight) requests in flight; \(uploads.count) are")
        }
        // Each record is counted once, when the commit that passes it completes: a batch
        // settled twice (by both copies of a hedge) would count its records twice.
        guard UInt64(machine.stats.records + machine.stats.deadLettered) <= world.committed else {
            throw Violation(message: "\(machine.stats.records) records delivered and \(machine.stats.deadLettered) dead-lettered, past the committed offset \(world.committed)")
        }
        // The hedge budget: one hedge for every 20 other requests at most.
        guard machine.stats.hedges * 20 <= machine.stats.requests - machine.stats.hedges else {
            throw Violation(message: "\(machine.stats.hedges) hedges among \(machine.stats.requests) requests: over the budget of 5%")
        }
        if sent && uploads.count > machine.concurrency.limit {
            throw Violation(message: "\(uploads.count) requests in flight, over the limit of \(machine.concurrency.limit)")
        }
    }
}

// MARK: - The trace

extension SyncSimulation {
    static func describe(_ batch: SyncBatch) -> String {
        "[\(batch.start)..<\(batch.end) \(batch.records.count)r]"
    }

    static func describe(_ outcome: SinkOutcome) -> String {
        switch outcome {
        case .accepted: "accepted"
        case .retry(let error): "retry(\(error.status.map(String.init) ?? error.code.description))"
        case .tooLarge: "413"
        case .rejected: "400"
        case .fatal: "fatal"
        }
    }

    static func describe(_ action: SyncStateMachine.Action) -> String {
        switch action {
        case .read(let from, let count, _, let batches, let maxCount, _): "read(from \(from), \(count)r, \(batches)×\(maxCount))"
        case .upload(let batch, let slot, _): "upload(slot \(slot) \(describe(batch)))"
        case .deadLetter(let records, _): "deadLetter(\(records.map(\.seq)))"
        case .commit(let end): "commit(\(end))"
        case .recordDamage(let ranges): "recordDamage(\(ranges.map(\.seqs)))"
        case .scheduleTimer(let at, _): "timer(\(at.formatted))"
        case .cancelTimer: "cancelTimer"
        case .backoff(let until, _): "backoff(\(until.formatted))"
        case .scheduleWake(let at): "wake(\(at.formatted))"
        case .notify(let ids, _): "notify(\(ids))"
        case .finishFlush(let id, let report):
            "finish(\(id)\(report.failure.map { " \($0.code)" } ?? "")\(report.deadlineReached ? " deadline" : ""))"
        case .scheduleDeadline(let id, let at): "deadline(\(id) at \(at.formatted))"
        case .logRefusal: "logRefusal"
        case .shutDown: "shutDown"
        }
    }
}

extension Duration {
    /// Seconds with millisecond precision, for the trace.
    var formatted: String {
        let (seconds, attoseconds) = components
        let milliseconds = attoseconds / 1_000_000_000_000_000
        return "\(seconds).\(milliseconds < 10 ? "00" : milliseconds < 100 ? "0" : "")\(milliseconds)s"
    }
}
