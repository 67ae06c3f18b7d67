import Spool
import SpoolSync

/// The world a simulated sync machine acts on: a log that grows and drops records, a consumer
/// that reads from its committed offset, and a destination that keeps what it accepted.
///
/// Every choice the world makes comes from the seeded generator the simulation hands it, so
/// a seed fixes the whole run.
struct SyncWorld {
    /// How the destination behaves, drawn once per seed.
    struct Destination {
        /// The largest body it takes (payload bytes plus ``SimulatedSink/overhead`` a record), as
        /// nginx's `client_max_body_size`: larger requests get a 413. Nil: no limit.
        var maxBody: Int?
        /// Chances, per answer, of a 503, a 429 with `Retry-After`, a timeout, a 500 and a fatal refusal.
        var unavailable = 0.0
        var rateLimited = 0.0
        var timeout = 0.0
        var serverError = 0.0
        var fatal = 0.0
        /// The longest round trip of a normal answer, and the chance of a slow one (1 to 5 s).
        var latency: Duration = .milliseconds(50)
        var slow = 0.0
        /// The requests it says it takes at once (`Spool-Max-Concurrent-Requests`), in 9 of
        /// 10 answers (the others, as from a balancer's older collector, say nothing); nil:
        /// it never says.
        var declaredCapacity: Int?
    }

    /// The chances that a read, a commit or a dead-letter write fails.
    var readFails = 0.0
    var commitFails = 0.0
    var deadLetterFails = 0.0

    var destination = Destination()
    /// Records written, by seq (their payloads' bytes only matter for sizes).
    var log: [Record] = []
    /// Records the log dropped (the byte cap, expiry) before the consumer passed them.
    var dropped: [Bool] = []
    /// Records the log cannot read (damaged bytes): a read skips them with a `corrupt` notice.
    var damaged: Set<UInt64> = []
    /// Seqs of the damaged ranges the machine recorded (``SyncStateMachine/Action/recordDamage(_:)``).
    var damageRecorded: Set<UInt64> = []
    /// Records the destination will refuse in any request (a poison record: 400).
    var poison: Set<UInt64> = []
    /// The consumer's committed offset, as on disk.
    var committed: UInt64 = 0
    /// Seqs carried by requests the destination answered as accepted.
    var accepted: Set<UInt64> = []
    /// Seqs the destination refused alone (413 or 400 for a request of that record only).
    var refusedAlone: Set<UInt64> = []
    /// Seqs written to the dead-letter log.
    var deadLettered: Set<UInt64> = []
    /// The destination stopped answering with faults: only its permanent refusals remain (the
    /// simulation's calm phase, where liveness is checked).
    var calm = false

    var written: UInt64 { UInt64(log.count) }

    /// Appends `count` records of up to `maxPayload` bytes; a few become poison, and a run of a
    /// few may be damaged.
    mutating func append(_ count: Int, maxPayload: Int, poisonChance: Double, damageChance: Double = 0, random: inout SplitMix64) {
        let first = written
        if count > 0, random.nextUnit() < damageChance {
            let start = first + random.next() % UInt64(count)
            let length = 1 + random.next() % 10
            for seq in start..<min(start + length, first + UInt64(count)) { damaged.insert(seq) }
        }
        for _ in 0..<count {
            let seq = written
            let size = 1 + Int(random.next() % UInt64(maxPayload))
            log.append(Record(seq: seq, timestamp: Int64(seq), payload: [UInt8](repeating: UInt8(truncatingIfNeeded: seq), count: size)))
            dropped.append(false)
            if random.nextUnit() < poisonChance { poison.insert(seq) }
        }
    }

    /// The cap or expiry drops up to `count` of the oldest records the consumer has not passed.
    mutating func drop(_ count: Int) {
        var seq = committed
        var left = count
        while left > 0, seq < written {
            dropped[Int(seq)] = true
            seq += 1
            left -= 1
        }
    }

    /// A consumer's read: from the committed offset, up to `count` records and about `bytes`
    /// payload bytes (at least one record when any is pending), skipping dropped records and
    /// damaged ones (a `corrupt` notice a run); its end is past the last record and past the
    /// skipped ones after it.
    func read(count: Int, bytes: Int) -> ConsumerBatch {
        var records: [Record] = []
        var notices: [ReadNotice] = []
        var size = 0
        var seq = committed
        while seq < written {
            if dropped[Int(seq)] {
                seq += 1
                continue
            }
            if damaged.contains(seq) {
                let start = seq
                while seq < written, damaged.contains(seq), !dropped[Int(seq)] { seq += 1 }
                notices.append(ReadNotice(kind: .corrupt, range: start..<seq, detail: "sim.seg offset \(start): simulated damage"))
                continue
            }
            let record = log[Int(seq)]
            if records.count >= count || (!records.isEmpty && size + record.payload.count > bytes) { break }
            records.append(record)
            size += record.payload.count
            seq += 1
        }
        return ConsumerBatch(records: records, notices: notices, endSeq: seq, startSeq: committed)
    }

    /// The destination's answer to a request carrying `records`.
    mutating func answer(_ records: some Collection<Record>, random: inout SplitMix64) -> SinkOutcome {
        let draw = random.nextUnit()
        if !calm {
            var threshold = destination.fatal
            if draw < threshold { return .fatal(SyncError(.destinationRefused, "simulated: the destination refused for good")) }
            threshold += destination.unavailable
            if draw < threshold { return .retry(SyncError(.serverError, "simulated 503", status: 503, overloaded: true)) }
            threshold += destination.rateLimited
            if draw < threshold {
                let wait = Duration.milliseconds(Int64(random.next() % 5_000))
                return .retry(SyncError(.rateLimited, "simulated 429", status: 429, retryAfter: wait))
            }
            threshold += destination.serverError
            if draw < threshold { return .retry(SyncError(.serverError, "simulated 500", status: 500)) }
        }
        let body = records.reduce(0) { $0 + $1.payload.count + SimulatedSink.overhead }
        if let maxBody = destination.maxBody, body > maxBody {
            if records.count == 1, let only = records.first { refusedAlone.insert(only.seq) }
            return .tooLarge(SyncError(.payloadTooLarge, "simulated 413", status: 413))
        }
        if records.contains(where: { poison.contains($0.seq) }) {
            if records.count == 1, let only = records.first { refusedAlone.insert(only.seq) }
            return .rejected(SyncError(.rejected, "simulated 400", status: 400))
        }
        accepted.formUnion(records.map(\.seq))
        return .accepted
    }
}

/// A destination's request encoding for the simulation: a request carries as many records as
/// fit `maxBytes`, each counted as its payload plus ``overhead`` bytes (an envelope's share).
/// The simulation answers requests itself; `send` is never called.
struct SimulatedSink: SyncSink {
    static let overhead = 16

    func prepare(_ records: ArraySlice<OutgoingRecord>, maxBytes: Int) -> SinkRequest<Int> {
        var bytes = 0
        var count = 0
        for record in records {
            let size = record.stored.payload.count + Self.overhead
            if count > 0 && bytes + size > maxBytes { break }
            bytes += size
            count += 1
        }
        return SinkRequest(body: count, count: count, bytes: bytes)
    }

    func prepare(exactly records: [OutgoingRecord]) -> SinkRequest<Int> {
        let bytes = records.reduce(0) { $0 + $1.stored.payload.count + Self.overhead }
        return SinkRequest(body: records.count, count: records.count, bytes: bytes)
    }

    func send(_ request: Int, timeout: Duration) async -> SinkOutcome {
        preconditionFailure("the simulation answers requests itself")
    }
}
