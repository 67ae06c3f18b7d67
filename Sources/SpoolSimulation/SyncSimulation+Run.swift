import Spool
import SpoolSync

// MARK: - The two phases

extension SyncSimulation {
    /// The most records a run writes.
    static let maxRecords: UInt64 = 3_000
    /// The most steps the calm phase may take to commit everything: past it, liveness failed.
    static let calmSteps = 100_000

    /// Events of every kind, in an order drawn from the seed, for `chaosSteps` steps or until
    /// the machine stops.
    mutating func chaos() throws(Violation) {
        try appendRecords(Int(random.next() % 200))
        while step < chaosSteps && !machine.isStopped {
            let draw = random.nextUnit()
            switch draw {
            case ..<0.45: try deliverSomething()
            case ..<0.60: try appendRecords(1 + Int(random.next() % 40), tell: true)
            case ..<0.68: try requestFlush()
            case ..<0.70: world.drop(1 + Int(random.next() % 30))
            case ..<0.73: try send(machine.isRunning ? .pause : .resume, "\(machine.isRunning ? "pause" : "resume")")
            case ..<0.75: try send(.start, "start")
            case ..<0.76:
                let interval = Duration.seconds(Int64(random.next() % 20))
                try send(.setFlushInterval(interval), "setFlushInterval \(interval)")
            case ..<0.7605: try send(.stop, "stop")
            case ..<0.95: try advance(to: now + .milliseconds(Int64(random.next() % 50)))
            default: try advance(to: now + .seconds(Int64(1 + random.next() % 120)))  // the clock jumps
            }
        }
    }

    /// The destination stops failing (its 413 limit and poison records stay), local operations
    /// succeed, and a flush asks for the whole log: it must all be committed, and every flush
    /// answered. A stopped machine is only let finish what it had in flight.
    mutating func calmDown() throws(Violation) {
        world.calm = true
        stopped = machine.isStopped
        if !stopped {
            try requestFlush(deadline: .some(nil), retries: 1_000_000, through: .some(world.written))
        }
        var budget = Self.calmSteps
        while !flushes.isEmpty || local != nil || !uploads.isEmpty {
            budget -= 1
            guard budget > 0 else {
                throw Violation(message: "liveness: not drained after \(Self.calmSteps) calm steps (committed \(world.committed) of \(world.written), \(flushes.count) flushes waiting)")
            }
            if local != nil || !uploads.isEmpty {
                try deliverSomething(timers: false)
            } else if let at = nextWake {
                try advance(to: at)
            } else {
                throw Violation(message: "liveness: \(flushes.count) flushes wait with nothing in flight and no timer armed (committed \(world.committed) of \(world.written))")
            }
        }
        guard !stopped else { return }
        guard world.committed == world.written else {
            throw Violation(message: "liveness: the destination accepts everything, yet only \(world.committed) of \(world.written) records were committed")
        }
    }
}

// MARK: - Events from the world

extension SyncSimulation {
    mutating func appendRecords(_ count: Int, tell: Bool = false) throws(Violation) {
        let count = min(count, Int(Self.maxRecords - min(world.written, Self.maxRecords)))
        guard count > 0 else { return }
        world.append(count, maxPayload: maxPayload, poisonChance: poisonChance, damageChance: damageChance, random: &random)
        if tell { try send(.recordsWritten(end: world.written), "written to \(world.written)") }
    }

    /// A flush: with a deadline, retries and an offset drawn from the seed unless given.
    mutating func requestFlush(deadline: Duration?? = nil, retries: Int? = nil, through: UInt64?? = nil) throws(Violation) {
        let id = nextFlush
        nextFlush += 1
        let deadline = deadline ?? (random.nextUnit() < 0.4 ? nil : now + .milliseconds(Int64(200 + random.next() % 60_000)))
        let retries = retries ?? (random.nextUnit() < 0.3 ? 50 : Int(random.next() % 4))
        let through = through ?? (random.nextUnit() < 0.3 ? world.written : nil)
        flushes[id] = Flush(deadline: deadline, through: through, retries: retries)
        try send(.flushRequested(id: id, deadline: deadline, retries: retries, through: through),
                 "flush \(id) deadline \(deadline.map { "\($0)" } ?? "-") retries \(retries) through \(through.map(String.init) ?? "-")")
    }

    /// The earliest timer, backoff or flush deadline armed.
    var nextWake: Duration? {
        ([timer?.at, backoff?.at, retryWake].compactMap { $0 } + deadlines.values).min()
    }

    /// Moves the clock to `target`, firing every timer, backoff and flush deadline due on the
    /// way, in order.
    mutating func advance(to target: Duration) throws(Violation) {
        while let at = nextWake, at <= target {
            now = max(now, at)
            if let armed = timer, armed.at == at {
                timer = nil
                try send(.timerFired(generation: armed.generation), "timer \(armed.generation)")
            } else if let armed = backoff, armed.at == at {
                backoff = nil
                try send(.backoffExpired(generation: armed.generation), "backoff over \(armed.generation)")
            } else if retryWake == at {
                retryWake = nil
                try send(.wake, "wake")
            } else if let id = deadlines.first(where: { $0.value == at })?.key {
                deadlines[id] = nil
                try send(.flushDeadlinePassed(id: id), "deadline of flush \(id)")
            }
        }
        now = max(now, target)
    }

    /// Finishes one operation in flight, drawn at random: the read, commit or dead-letter
    /// write, or one request (answered in any order); with `timers`, a due timer too. Time
    /// moves to when it is ready, firing what falls due before.
    mutating func deliverSomething(timers: Bool = true) throws(Violation) {
        var choices: [Int?] = local == nil ? [] : [nil]
        choices += uploads.keys.sorted()
        guard !choices.isEmpty else {
            if timers, let at = nextWake { try advance(to: at) }
            return
        }
        switch choices[Int(random.next() % UInt64(choices.count))] {
        case nil: try finishLocal()
        case let slot?: try answer(slot: slot)
        }
    }

    mutating func finishLocal() throws(Violation) {
        guard let pending = local else { return }
        try advance(to: pending.readyAt)  // timers due on the way fire first; they finish no operation
        local = nil
        let fails = !world.calm && random.nextUnit() < failureChance(pending)
        switch pending {
        case .read(let from, let count, let bytes, let batches, let maxCount, let maxBytes, _):
            if fails { return try send(.readFailed(SyncError(.readFailed, "simulated read failure")), "read failed") }
            let read = world.read(count: count, bytes: bytes)
            let cut = sink.prepare(read, from: from, maxCount: maxCount, maxBytes: maxBytes, batches: batches)
            try send(.readCompleted(cut), "read from \(from): \(cut.map(Self.describe).joined(separator: " "))")
        case .commit(let end, _):
            if fails { return try send(.commitFailed(SyncError(.commitFailed, "simulated commit failure")), "commit to \(end) failed") }
            try checkCommit(to: end)
            world.committed = end
            try send(.commitCompleted, "committed to \(end)")
        case .deadLetter(let records, _):
            if fails { return try send(.deadLetterFailed(SyncError(.deadLetterFailed, "simulated dead-letter failure")), "dead letter failed") }
            world.deadLettered.formUnion(records.map(\.seq))
            try send(.deadLetterCompleted, "dead-lettered \(records.map(\.seq))")
        case .recordDamage(let ranges, _):
            if fails { return try send(.damageRecordFailed(SyncError(.deadLetterFailed, "simulated damage record failure")), "damage record failed") }
            for range in ranges { world.damageRecorded.formUnion(range.seqs) }
            try send(.damageRecorded, "damage recorded \(ranges.map { "\($0.seqs)" })")
        }
    }

    private func failureChance(_ pending: Pending) -> Double {
        switch pending {
        case .read: world.readFails
        case .commit: world.commitFails
        case .deadLetter, .recordDamage: world.deadLetterFails
        }
    }

    mutating func answer(slot: Int) throws(Violation) {
        guard let upload = uploads[slot] else { return }
        try advance(to: upload.readyAt)  // timers due on the way fire first; they answer no request
        uploads[slot] = nil
        let outcome: SinkOutcome
        if now - upload.sent >= upload.timeout {
            outcome = .retry(SyncError(.timeout, "simulated timeout"))
        } else {
            outcome = world.answer(upload.batch.records, random: &random)
        }
        let bytes = upload.batch.records.reduce(0) { $0 + $1.payload.count + SimulatedSink.overhead }
        if case .retry = outcome, machine.window.carriesBatch(slot: slot) {
            // A failure of the batch's own request (not of a hedge, nor of a copy no longer
            // needed): it counts against the retries of every flush waiting.
            for id in flushes.keys {
                for record in upload.batch.records { flushes[id]?.failures[record.seq, default: 0] += 1 }
            }
        }
        let declared = world.destination.declaredCapacity.flatMap { random.nextUnit() < 0.9 ? $0 : nil }
        try send(.uploadCompleted(slot: slot, outcome, bytes: bytes, declaredCapacity: declared),
                 "slot \(slot) \(Self.describe(upload.batch)) → \(Self.describe(outcome))\(declared.map { " (takes \($0))" } ?? "")")
    }
}
