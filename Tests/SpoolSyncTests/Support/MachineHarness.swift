import Spool
@testable import SpoolSync
import Testing

/// Drives a `SyncStateMachine` the way the worker does, synchronously: reads, commits and
/// dead-letter writes happen at once against an in-memory list; uploads are answered by
/// `respond` (or held in flight when `holdUploads` is set, and answered in any order by
/// `complete`); timers fire on `advance`. Reads cut batches from the `from` asked for, as the
/// worker's `RequestBuilder` does.
struct MachineHarness {
    var machine: SyncStateMachine
    var records: [Record] = []
    var committed: UInt64 = 0
    var now: Duration = .zero
    var jitter = 1.0
    var timer: (at: Duration, generation: Int)?
    var backoff: (at: Duration, generation: Int)?
    /// The wake of a batch retried on its own, if armed.
    var retryWake: Duration?
    /// Flush deadlines armed by the machine, by flush id.
    var deadlines: [Int: Duration] = [:]
    /// The seqs of every upload, in order.
    var uploads: [[UInt64]] = []
    /// The timeout of every upload, in order.
    var timeouts: [Duration] = []
    var commits: [UInt64] = []
    var deadLettered: [UInt64] = []
    var reports: [Int: FlushReport] = [:]
    var results: [Int: [BatchResult]] = [:]
    var respond: (SyncBatch) -> SinkOutcome = { _ in .accepted }
    var holdUploads = false
    /// Reads are held until `completeRead` (as a read still running on the worker's thread),
    /// and then see the log as it is then.
    var holdReads = false
    /// The read held, if any: what it asked for.
    var heldRead: (from: UInt64, count: Int, maxCount: Int, maxBytes: Int)?
    /// Seqs the machine's uploads carried that were answered as accepted.
    var accepted: Set<UInt64> = []
    /// Uploads held in flight, in the order they were sent.
    var inFlight: [(slot: Int, batch: SyncBatch)] = []
    /// The most uploads held in flight at once.
    var peakInFlight = 0
    /// Seqs the reads skip, as a consumer skips expired or dropped records.
    var skipped: Set<UInt64> = []
    var failCommits = 0
    var failReads = 0
    /// Reads asked for, with the offset each asked from.
    var reads: [UInt64] = []
    /// Whether the machine asked for a teardown (a fatal answer).
    var shutDown = false
    /// The encoded size of each record in the batches reads make, when set (as a sink's
    /// envelope makes it); the payload's size otherwise.
    var encodedBytesPerRecord: Int?
    private var nextID = 0

    init(_ configuration: SyncConfiguration = .init(), records count: Int = 0, committed: UInt64 = 0) {
        machine = SyncStateMachine(configuration: configuration, committed: committed, pending: UInt64(count) - committed)
        self.committed = committed
        addRecords(count)
    }

    private mutating func addRecords(_ count: Int) {
        for _ in 0..<count {
            let seq = UInt64(records.count)
            records.append(Record(seq: seq, timestamp: Int64(seq), payload: Array("{\"n\":\(seq)}".utf8)))
        }
    }

    /// Appends `count` records and tells the machine they were written.
    mutating func append(_ count: Int) {
        addRecords(count)
        send(.recordsWritten(end: UInt64(records.count)))
    }

    /// Requests a flush; returns its id (its report lands in `reports[id]`).
    @discardableResult
    mutating func flush(deadline: Duration? = nil, retries: Int = 0, through: UInt64? = nil) -> Int {
        let id = nextID
        nextID += 1
        results[id] = []
        send(.flushRequested(id: id, deadline: deadline, retries: retries, through: through))
        return id
    }

    mutating func send(_ event: SyncStateMachine.Event) {
        var events = [event]
        while !events.isEmpty {
            let next = events.removeFirst()
            for action in machine.handle(next, now: now, jitter: jitter) {
                if let follow = perform(action) { events.append(follow) }
            }
            if let violation = machine.checkInvariants() { Issue.record("after \(next): \(violation)") }
        }
    }

    /// Answers the first `count` uploads with a retryable `error`, and accepts the rest.
    mutating func failFirst(_ count: Int, with error: SyncError) {
        var remaining = count
        respond = { _ in
            guard remaining > 0 else { return .accepted }
            remaining -= 1
            return .retry(error)
        }
    }

    /// Answers the upload held in flight whose first seq is `first` (the oldest when nil).
    mutating func complete(_ outcome: SinkOutcome = .accepted, first: UInt64? = nil) {
        let index = first.map { first in inFlight.firstIndex { $0.batch.records.first?.seq == first } } ?? inFlight.indices.first
        guard let index else { preconditionFailure("no upload in flight starting at \(first.map(String.init) ?? "any seq")") }
        complete(outcome, at: index)
    }

    /// Answers the upload held in flight in `slot` (a hedge's copy, say).
    mutating func complete(_ outcome: SinkOutcome = .accepted, slot: Int) {
        guard let index = inFlight.firstIndex(where: { $0.slot == slot }) else { preconditionFailure("no upload in flight in slot \(slot)") }
        complete(outcome, at: index)
    }

    private mutating func complete(_ outcome: SinkOutcome, at index: Int) {
        let (slot, batch) = inFlight.remove(at: index)
        if case .accepted = outcome { accepted.formUnion(batch.records.map(\.seq)) }
        send(.uploadCompleted(slot: slot, outcome, bytes: batch.records.count * 10, declaredCapacity: nil))
    }

    /// Completes the read held (see `holdReads`).
    mutating func completeRead() {
        guard let read = heldRead else { preconditionFailure("no read is held") }
        heldRead = nil
        send(self.read(from: read.from, count: read.count, maxCount: read.maxCount, maxBytes: read.maxBytes))
    }

    /// Completes the read held, if any, and accepts every upload held, oldest first (moving the
    /// clock on by `advancing` after each, and to the end of a backoff when nothing else is
    /// left), until nothing is held or armed but the interval timer.
    mutating func drain(advancing step: Duration = .zero) {
        while true {
            if heldRead != nil {
                completeRead()
            } else if !inFlight.isEmpty {
                complete()
            } else if let at = [backoff?.at, retryWake].compactMap({ $0 }).min() {
                advance(to: at)
            } else {
                return
            }
            advance(to: now + step)
        }
    }

    /// The first seqs of the uploads held in flight, in the order they were sent.
    var inFlightFirsts: [UInt64] { inFlight.compactMap { $0.batch.records.first?.seq } }

    /// Moves time to `target`, firing due timers, backoffs and flush deadlines in order.
    mutating func advance(to target: Duration) {
        enum Wake { case timer(Int), backoff(Int), deadline(Int), retry }
        while true {
            var candidates: [(Duration, Wake)] = []
            if let timer { candidates.append((timer.at, .timer(timer.generation))) }
            if let backoff { candidates.append((backoff.at, .backoff(backoff.generation))) }
            if let retryWake { candidates.append((retryWake, .retry)) }
            for (id, at) in deadlines { candidates.append((at, .deadline(id))) }
            guard let (at, wake) = candidates.filter({ $0.0 <= target }).min(by: { $0.0 < $1.0 }) else { break }
            now = max(now, at)
            switch wake {
            case .timer(let generation):
                timer = nil
                send(.timerFired(generation: generation))
            case .backoff(let generation):
                backoff = nil
                send(.backoffExpired(generation: generation))
            case .deadline(let id):
                deadlines[id] = nil
                send(.flushDeadlinePassed(id: id))
            case .retry:
                retryWake = nil
                send(.wake)
            }
        }
        now = max(now, target)
    }


    /// A read as the worker's consumer makes it: from the committed offset, cut from `from`.
    private func read(from: UInt64, count: Int, maxCount: Int, maxBytes: Int) -> SyncStateMachine.Event {
        var batches: [SyncBatch] = []
        var batch: [Record] = []
        var bytes = 0
        var start = from
        for record in records[Int(max(committed, from))...] where !skipped.contains(record.seq) {
            if batch.count == maxCount || (!batch.isEmpty && bytes + record.payload.count > maxBytes) {
                let end = batch[batch.count - 1].seq + 1
                batches.append(SyncBatch(records: batch, start: start, end: end, encodedBytesPerRecord: encodedBytesPerRecord))
                start = end
                batch = []
                bytes = 0
                if batches.count == count { break }
            }
            batch.append(record)
            bytes += record.payload.count
        }
        if batches.count < count {
            // The last batch also skips whatever the read skipped after it.
            let end = batch.last.map { $0.seq + 1 } ?? (records.isEmpty ? committed : max(committed, from, UInt64(records.count)))
            if !batch.isEmpty || batches.isEmpty {
                batches.append(SyncBatch(records: batch, start: start, end: max(start, end), encodedBytesPerRecord: encodedBytesPerRecord))
            }
        }
        return .readCompleted(batches)
    }

    private mutating func perform(_ action: SyncStateMachine.Action) -> SyncStateMachine.Event? {
        switch action {
        case .read(let from, _, _, let count, let maxCount, let maxBytes):
            reads.append(from)
            if failReads > 0 {
                failReads -= 1
                return .readFailed(SyncError(.readFailed, "injected"))
            }
            if holdReads {
                precondition(heldRead == nil, "two reads at once")
                heldRead = (from, count, maxCount, maxBytes)
                return nil
            }
            return read(from: from, count: count, maxCount: maxCount, maxBytes: maxBytes)
        case .upload(let batch, let slot, let timeout):
            uploads.append(batch.records.map(\.seq))
            timeouts.append(timeout)
            if holdUploads {
                inFlight.append((slot, batch))
                peakInFlight = max(peakInFlight, inFlight.count)
                return nil
            }
            let outcome = respond(batch)
            if case .accepted = outcome { accepted.formUnion(batch.records.map(\.seq)) }
            return .uploadCompleted(slot: slot, outcome, bytes: batch.records.count * 10, declaredCapacity: nil)
        case .deadLetter(let refused, _):
            deadLettered += refused.map(\.seq)
            return .deadLetterCompleted
        case .recordDamage:
            return .damageRecorded
        case .commit(let end):
            if failCommits > 0 {
                failCommits -= 1
                return .commitFailed(SyncError(.commitFailed, "injected"))
            }
            precondition(end >= committed, "commit went backwards")
            committed = end
            commits.append(end)
            return .commitCompleted
        case .scheduleTimer(let at, let generation):
            timer = (at, generation)
        case .cancelTimer:
            timer = nil
        case .backoff(let until, let generation):
            backoff = (until, generation)
        case .scheduleWake(let at):
            retryWake = at
        case .notify(let ids, let result):
            for id in ids { results[id, default: []].append(result) }
        case .scheduleDeadline(let id, let at):
            deadlines[id] = at
        case .finishFlush(let id, let report):
            deadlines[id] = nil
            reports[id] = report
        case .logRefusal:
            break
        case .shutDown:
            shutDown = true
        }
        return nil
    }
}

extension SyncConfiguration {
    /// The defaults with periodic flushing off and a big count trigger: manual only.
    static var manual: SyncConfiguration {
        var configuration = SyncConfiguration()
        configuration.flushInterval = .zero
        configuration.flushCount = 1_000_000
        return configuration
    }
}

extension BatchResult {
    /// A short name, for comparing sequences of results.
    var name: String {
        switch self {
        case .good: "good"
        case .noData: "noData"
        case .error(let error): "error(\(error.code))"
        case .damaged(let ranges): "damaged(\(ranges.map(\.seqs)))"
        }
    }
}

extension SyncBatch {
    /// A batch of `records` as read from a log that is not a collector's (the machine's tests
    /// name no log): each unwrapped as it is, as the worker's adapter does.
    init(records: [Record], start: UInt64, end: UInt64, encodedBytesPerRecord: Int? = nil) {
        self.init(outgoing: RecordUnwrapper(logID: SyncBatch.testLog, origins: false).unwrap(records), start: start, end: end,
                  encodedBytes: encodedBytesPerRecord.map { $0 * records.count })
    }

    /// The log the machine's tests' batches are read from.
    static let testLog = LogID(bytes: Array(repeating: 0, count: 16))
}
