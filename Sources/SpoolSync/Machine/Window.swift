import Spool

extension SyncStateMachine {
    /// The batches read and not yet committed, in seq order, and every request in flight for
    /// them: each batch's first copy, its hedge, the copies abandoned behind a failure and
    /// those no longer needed.
    ///
    /// Every request in flight holds one *slot* until its answer comes, whatever became of its
    /// batch: the concurrency limit counts slots, so a destination never sees more connections
    /// than the limit. The window is the only owner of the slots and of the batches' requests;
    /// ``checkInvariants(from:)`` says what holds between them. Pure.
    package struct Window: Sendable {
        /// Batches read and not committed, in seq order: unsent, in flight, or answered and
        /// waiting for those before them.
        package private(set) var batches: [SyncBatch] = []
        /// First copies in flight whose batches left the window (dropped behind a failure): their
        /// answers are ignored, but a failure still counts against the range's retries.
        private(set) var abandoned: [Int: Abandoned] = [:]
        /// Copies no longer needed (the other copy of a hedged batch settled it, or the batch
        /// left the window): they run on to their answer, which is ignored. Never cancelled: a
        /// request cancelled while its connection is being made can leave that connection idle
        /// in the client's pool, and a server that serves one connection at a time waits on it.
        package private(set) var retired: Set<Int> = []
        /// Slots already reported late to the concurrency controller.
        private(set) var late: Set<Int> = []
        /// What the requests of ranges that left the window unsettled went through, given back
        /// to their batches when they are read again.
        private(set) var attempts = AttemptLedger()
        /// The slot the next request takes.
        private(set) var nextSlot = 0

        /// A first copy in flight whose batch left the window.
        struct Abandoned: Sendable {
            var sent: Duration
            var range: Range<UInt64>
        }

        /// What the request answered in a slot carried (``answered(slot:)``).
        enum Carried {
            /// A copy no longer needed.
            case retired
            /// A slot the window does not know.
            case unknown
            /// A first copy abandoned behind a failure.
            case abandoned(Abandoned, wasLate: Bool)
            /// The hedge of the batch at `index`.
            case hedge(index: Int)
            /// The first copy of the batch at `index`, sent at `sent`; its hedge, if one was out,
            /// is retired.
            case first(index: Int, sent: Duration, wasLate: Bool)
        }

        /// The hedged batch's copies when its hedge is answered (``hedgeAnswered(at:settles:)``).
        struct HedgeAnswer {
            /// When the first copy and the hedge went.
            var firstSent: Duration
            var hedgeSent: Duration
            /// The first copy was reported late (only when the hedge settles the batch).
            var wasLate: Bool
        }

        // MARK: Reading

        var isEmpty: Bool { batches.isEmpty }

        /// Requests in flight: every slot held.
        package var inFlight: Int {
            batches.reduce(0) { $0 + ($1.slot == nil ? 0 : 1) + ($1.hedge == nil ? 0 : 1) } + abandoned.count + retired.count
        }

        /// Whether the request in `slot` carries a batch as its first copy (in the window, or
        /// abandoned behind a failure): its failure counts against the batch's retries (a
        /// hedge's, or a copy's no longer needed, does not).
        package func carriesBatch(slot: Int) -> Bool {
            abandoned[slot] != nil || batches.contains { $0.slot == slot }
        }

        /// The records and payload bytes the window holds.
        var held: (records: Int, bytes: Int) {
            batches.reduce((0, 0)) { ($0.0 + $1.records.count, $0.1 + $1.payloadBytes) }
        }

        /// Where the failed batch is, if one is: nothing after it is sent and nothing more is
        /// read until it reaches the head (batches before it still go out: the halves of a
        /// split, say, which must be settled for it to reach the head at all).
        var failedIndex: Int? { batches.firstIndex { if case .failed = $0.answer { true } else { false } } }

        /// Where the batch holding the commit frontier is: the first neither accepted nor refused.
        var frontier: Int? {
            batches.firstIndex { batch in
                switch batch.answer {
                case .accepted?, .refused?: false
                case .failed?, nil: true
                }
            }
        }

        /// When the unsent batches retried on their own are due.
        var retryTimes: [Duration] { batches.compactMap { $0.isUnsent ? $0.retryAt : nil } }

        /// The most failures of any range read again: what a drain that reads them all retries.
        var mostFailures: Int { attempts.mostFailures }

        // MARK: Reads and commits

        /// Adds the batches of a read at the end, with what their ranges went through before.
        mutating func append(_ read: [SyncBatch]) {
            batches += read.map(attempts.restored)
        }

        /// Removes the head (settled, or a skipped range) to commit it.
        mutating func removeFirst() -> SyncBatch {
            batches.removeFirst()
        }

        /// Forgets what the ranges committed past went through.
        mutating func committed(through end: UInt64) {
            attempts.forget(below: end)
        }

        /// A drain ended: the batches' failures are forgotten, so the next flush has its whole
        /// `retries` allowance.
        mutating func forgetAttempts() {
            attempts = AttemptLedger()
        }

        /// Drops every batch (the machine stopped); requests in flight keep their slots.
        mutating func removeAllBatches() {
            batches.removeAll()
        }

        /// Drops every batch after `index` (after a failure there; `-1` drops them all): those
        /// in flight are abandoned, their hedges retired, and all are read again later with what
        /// they went through.
        mutating func drop(after index: Int) {
            for batch in batches[(index + 1)...] {
                attempts.keep(batch)
                if case .inFlight(let slot, let sent) = batch.state { abandoned[slot] = Abandoned(sent: sent, range: batch.start..<batch.end) }
                if let hedge = batch.hedge { retired.insert(hedge.slot) }
            }
            batches.removeSubrange((index + 1)...)
        }

        /// Drops the unsent batches at the end, after `index`, to read them again (cut for
        /// limits that no longer hold).
        mutating func dropUnsentTail(after index: Int) {
            while batches.count > index + 1, batches[batches.count - 1].isUnsent { attempts.keep(batches.removeLast()) }
        }

        // MARK: Requests

        /// Sends the unsent batch at `index` in the next slot.
        /// - Returns: the slot, and whether the batch is one retried on its own.
        mutating func send(at index: Int, now: Duration) -> (slot: Int, retried: Bool) {
            let slot = takeSlot()
            batches[index].state = .inFlight(slot: slot, sent: now)
            return (slot, batches[index].retryAt != nil)
        }

        /// Sends a second copy of the batch at `index` (in flight, never hedged) in the next slot.
        /// - Returns: the slot.
        mutating func hedge(at index: Int, now: Duration) -> Int {
            let slot = takeSlot()
            batches[index].hedge = (slot, now)
            batches[index].hedged = true
            return slot
        }

        private mutating func takeSlot() -> Int {
            defer { nextSlot += 1 }
            return nextSlot
        }

        /// Reports the requests in flight past `after` not reported before, once each.
        /// - Returns: when each was sent.
        mutating func newlyLate(after: Duration, now: Duration) -> [Duration] {
            var sent = abandoned.map { (slot: $0.key, at: $0.value.sent) }
            for batch in batches {
                if case .inFlight(let slot, let at) = batch.state { sent.append((slot, at)) }
            }
            var found: [Duration] = []
            for request in sent where now - request.at > after && !late.contains(request.slot) {
                late.insert(request.slot)
                found.append(request.at)
            }
            return found
        }

        /// Frees the slot of a request answered, and says what it carried.
        mutating func answered(slot: Int) -> Carried {
            if retired.remove(slot) != nil { return .retired }
            let wasLate = late.remove(slot) != nil
            if let request = abandoned.removeValue(forKey: slot) { return .abandoned(request, wasLate: wasLate) }
            if let index = batches.firstIndex(where: { $0.hedge?.slot == slot }) { return .hedge(index: index) }
            guard let index = batches.firstIndex(where: { $0.slot == slot }), case .inFlight(_, let sent) = batches[index].state else {
                return .unknown
            }
            if let hedge = batches[index].hedge {
                batches[index].hedge = nil
                retired.insert(hedge.slot)
            }
            return .first(index: index, sent: sent, wasLate: wasLate)
        }

        /// The hedge of the batch at `index` was answered. When it `settles` the batch, the
        /// first copy is retired (it runs on, its answer ignored); otherwise the first copy
        /// carries the batch as it did before the hedge. Nil if the batch has no hedge.
        mutating func hedgeAnswered(at index: Int, settles: Bool) -> HedgeAnswer? {
            guard let hedge = batches[index].hedge, case .inFlight(let slot, let sent) = batches[index].state else { return nil }
            batches[index].hedge = nil
            guard settles else { return HedgeAnswer(firstSent: sent, hedgeSent: hedge.sent, wasLate: false) }
            retired.insert(slot)
            return HedgeAnswer(firstSent: sent, hedgeSent: hedge.sent, wasLate: late.remove(slot) != nil)
        }

        // MARK: Answers

        /// Keeps the answer of the batch at `index` until everything before it is settled.
        mutating func settle(at index: Int, _ answer: SyncBatch.Answer) {
            batches[index].state = .answered(answer)
        }

        /// One more failure worth retrying for the batch at `index`.
        /// - Returns: its failures now.
        mutating func failed(at index: Int) -> Int {
            batches[index].failures += 1
            return batches[index].failures
        }

        /// The batch at `index` goes again on its own, not before `until`.
        mutating func retry(at index: Int, notBefore until: Duration) {
            batches[index].state = .unsent
            batches[index].retryAt = until
        }

        /// Replaces the batch at `index` by its two halves, unsent.
        mutating func split(at index: Int) {
            let (first, second) = batches[index].split()
            batches.replaceSubrange(index...index, with: [first, second])
        }

        /// An abandoned request of `range` failed in a way worth retrying: the batches read
        /// again over its range since count it too.
        /// - Returns: the range's failures now.
        mutating func abandonedRequestFailed(_ range: Range<UInt64>) -> Int {
            let over = batches.indices.filter { batches[$0].start < range.upperBound && range.lowerBound < batches[$0].end }
            let failures = attempts.failed(range, after: over.map { batches[$0].failures }.max() ?? 0)
            for index in over { batches[index].failures = max(batches[index].failures, failures) }
            return failures
        }

        // MARK: Invariants

        /// What is wrong with the window, if anything, when its first batch must start at
        /// `base` (the committed offset, or the end of the commit in flight). Nil when:
        /// - the batches are one contiguous run from `base` (``contiguityViolation(_:from:)``);
        /// - every slot is held once: by a batch's first copy, a hedge, an abandoned copy or a
        ///   retired one, each below the next slot;
        /// - a hedge is out only beside its batch's first copy in flight, and marks it hedged;
        /// - only requests in flight are marked late;
        /// - nothing after a failed batch is in flight.
        package func checkInvariants(from base: UInt64) -> String? {
            if let violation = Self.contiguityViolation(batches, from: base) { return "the window is not contiguous: \(violation)" }
            var slots = Set(abandoned.keys)
            var firstCopies = Set(abandoned.keys)
            func hold(_ slot: Int) -> String? {
                guard slot < nextSlot else { return "slot \(slot) is in use before it was given (next: \(nextSlot))" }
                guard slots.insert(slot).inserted else { return "slot \(slot) is held twice" }
                return nil
            }
            for slot in retired {
                if let violation = hold(slot) { return violation }
            }
            for slot in abandoned.keys where slot >= nextSlot { return "slot \(slot) is in use before it was given (next: \(nextSlot))" }
            let failed = failedIndex ?? batches.endIndex
            for (index, batch) in batches.enumerated() {
                if let slot = batch.slot {
                    if let violation = hold(slot) { return violation }
                    firstCopies.insert(slot)
                    if index > failed { return "batch \(batch.start)..<\(batch.end) is in flight behind a failed batch" }
                }
                if let hedge = batch.hedge {
                    if let violation = hold(hedge.slot) { return violation }
                    guard batch.slot != nil, batch.hedged else { return "batch \(batch.start)..<\(batch.end) has a hedge out without its first copy in flight" }
                }
            }
            guard late.isSubset(of: firstCopies) else { return "slots \(late.subtracting(firstCopies).sorted()) are marked late but carry no batch" }
            return nil
        }

        /// What is wrong, if `batches` are not one contiguous run from `from`: each batch starts
        /// where the one before ends (the first at `from`), and holds only records of its own
        /// range, in seq order. Nil when they are. A run that is not contiguous would commit past
        /// records never sent, so the machine never commits one.
        ///
        /// It runs at every read and every answer, over every record in the window, so it reads
        /// the seqs in place (by index, not through ``SyncBatch/records``, which copies each
        /// record, nor over a generic collection of batches, which copies each batch).
        static func contiguityViolation(_ batches: [SyncBatch], from: UInt64) -> String? {
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
    }
}
