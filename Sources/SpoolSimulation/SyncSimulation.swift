import Spool
import SpoolSync

/// A deterministic simulator of the sync state machine (FoundationDB's simulation testing,
/// TigerBeetle's VOPR): a seeded driver feeds ``SyncStateMachine`` every event it can receive,
/// in an order drawn from the seed, against a model of the world (``SyncWorld``), and checks
/// the machine's invariants after every step.
///
/// A run has two phases:
/// - **chaos**: reads, commits and dead-letter writes that finish late or fail; answers in any
///   order (accepted, 413, 400, 429 with `Retry-After`, 503, 500, timeouts, fatal); flushes
///   with deadlines, offsets and retries; pause, resume, stop; new writes, records dropped by
///   the cap; the clock creeping and jumping;
/// - **calm**: the destination stops failing (its 413 limit and poison records stay) and a
///   flush asks for the whole log: everything must be committed (liveness), every flush
///   answered.
///
/// Invariants, after every step:
/// - the consumer's offset passes only records the destination accepted, that were
///   dead-lettered (or refused and skipped, without a dead-letter log), that the log dropped,
///   or that the log could not read (damaged) and whose range was recorded before (never, with
///   `onDamage` `.stop`); it never moves backwards;
/// - no record is sent again (hedges aside) for a flush still waiting once it failed more often
///   than the flush's `retries` since the flush was asked for (requests abandoned in flight
///   included): no batch is sent more than 1 + `retries` times for a flush;
/// - the machine's own invariants hold (``SyncStateMachine/checkInvariants()``): the window is
///   one contiguous run from the committed offset (or the commit in flight), each request slot
///   is held once, nothing is in flight behind a failed batch, and outside a drain the window is empty;
/// - a step that sends leaves no more requests in flight than the controller's limit (hedges
///   included); hedges stay within their budget (one for 20 other requests); no record is counted delivered twice;
/// - one local operation at a time; only lone refused records are dead-lettered;
/// - a flush is answered once, by its deadline, and one that waits for an offset and reports
///   success is committed that far.
///
/// A failing seed replays exactly: ``run(seed:trace:)`` with `trace` prints every step.
package struct SyncSimulation {
    /// What a run that kept every invariant did.
    package struct Summary: Sendable {
        package var steps = 0
        package var written: UInt64 = 0
        package var committed: UInt64 = 0
        package var requests = 0
        /// Second copies of requests (hedges) among them.
        package var hedges = 0
        /// Records the log could not read whose range the machine recorded before passing it.
        package var damageRecorded = 0
        package var stopped = false
        /// A line a step, when the run was traced.
        package var trace: [String] = []
    }

    /// A broken invariant: the seed, the step, what broke, and the trace when it was asked for.
    package struct Failure: Error, CustomStringConvertible, Sendable {
        package var seed: UInt64
        package var step: Int
        package var message: String
        package var trace: [String]
        package var description: String {
            "seed \(seed) failed at step \(step): \(message)" + (trace.isEmpty ? "" : "\n" + trace.joined(separator: "\n"))
        }
    }

    /// Runs the simulation of `seed`.
    ///
    /// - Parameters:
    ///   - seed: fixes every choice of the run.
    ///   - trace: keep a line for every step (slower; for replaying a failing seed).
    /// - Returns: the run's summary, or the first broken invariant.
    package static func run(seed: UInt64, trace: Bool = false) -> Result<Summary, Failure> {
        var simulation = SyncSimulation(seed: seed, trace: trace)
        do {
            try simulation.chaos()
            try simulation.calmDown()
            return .success(simulation.summary)
        } catch {
            return .failure(Failure(seed: seed, step: simulation.step, message: error.message, trace: simulation.trace))
        }
    }

    struct Violation: Error {
        var message: String
    }

    // MARK: State

    var random: SplitMix64
    var world = SyncWorld()
    var machine: SyncStateMachine
    /// The simulated destination, draining a log of no real id (the simulation reads no ids).
    let sink = AnySink(SimulatedSink(), logID: LogID(bytes: Array(repeating: 0, count: 16)))
    var now: Duration = .zero
    var step = 0
    var tracing: Bool
    var trace: [String] = []
    var maxPayload: Int
    var poisonChance: Double
    /// The chance that an append damages a run of its records.
    var damageChance: Double
    var chaosSteps: Int

    // What the driver has in flight for the machine.
    var local: Pending?
    var uploads: [Int: (batch: SyncBatch, readyAt: Duration, sent: Duration, timeout: Duration)] = [:]
    var timer: (at: Duration, generation: Int)?
    var backoff: (at: Duration, generation: Int)?
    /// The wake of a batch retried on its own, if armed.
    var retryWake: Duration?
    var deadlines: [Int: Duration] = [:]
    /// Flushes asked for and not answered: what each waits for, the retries it allows, and
    /// the failed requests (hedges aside) each record had since it was asked for.
    var flushes: [Int: Flush] = [:]
    var nextFlush = 0
    var stopped = false
    var requests = 0

    struct Flush {
        var deadline: Duration?
        var through: UInt64?
        var retries: Int
        var failures: [UInt64: Int] = [:]
    }

    enum Pending {
        case read(from: UInt64, count: Int, bytes: Int, batches: Int, maxCount: Int, maxBytes: Int, readyAt: Duration)
        case commit(end: UInt64, readyAt: Duration)
        case deadLetter([Record], readyAt: Duration)
        case recordDamage([DamagedRange], readyAt: Duration)

        var readyAt: Duration {
            switch self {
            case .read(_, _, _, _, _, _, let at), .commit(_, let at), .deadLetter(_, let at), .recordDamage(_, let at): at
            }
        }
    }

    init(seed: UInt64, trace: Bool) {
        var random = SplitMix64(seed: seed)
        tracing = trace
        var configuration = SyncConfiguration()
        let concurrency = 1 + Int(random.next() % 8)
        configuration.concurrency = random.nextUnit() < 0.5 ? .fixed(concurrency) : .adaptive(max: 1 + Int(random.next() % 32))
        configuration.maxBatchCount = 1 + Int(random.next() % 40)
        configuration.maxBatchBytes = 1_024 + Int(random.next() % 8_000)
        configuration.maxWindowBytes = max(configuration.maxBatchBytes, 1_024 + Int(random.next() % 60_000))
        configuration.flushCount = 1 + Int(random.next() % 100)
        configuration.flushInterval = random.nextUnit() < 0.3 ? .zero : .seconds(Int64(1 + random.next() % 30))
        configuration.requestTimeout = .seconds(Int64(1 + random.next() % 30))
        configuration.deadLetterEnabled = random.nextUnit() < 0.8
        configuration.hedging = random.nextUnit() < 0.8
        configuration.onDamage = random.nextUnit() < 0.1 ? .stop : .skip
        do { try configuration.validate() } catch { preconditionFailure("the simulation drew an invalid configuration: \(error)") }
        machine = SyncStateMachine(configuration: configuration, committed: 0, pending: 0)

        // A destination of its own for each seed: from well-behaved to hostile.
        let hostility = random.nextUnit()
        world.destination.maxBody = random.nextUnit() < 0.5 ? 200 + Int(random.next() % 6_000) : nil
        world.destination.unavailable = hostility * 0.3 * random.nextUnit()
        world.destination.rateLimited = hostility * 0.1 * random.nextUnit()
        world.destination.timeout = hostility * 0.1 * random.nextUnit()
        world.destination.serverError = hostility * 0.1 * random.nextUnit()
        world.destination.fatal = random.nextUnit() < 0.05 ? 0.002 : 0
        world.destination.latency = .milliseconds(Int64(1 + random.next() % 200))
        world.destination.slow = random.nextUnit() < 0.3 ? 0.05 * random.nextUnit() : 0
        world.readFails = hostility * 0.05 * random.nextUnit()
        world.commitFails = hostility * 0.05 * random.nextUnit()
        world.deadLetterFails = hostility * 0.05 * random.nextUnit()
        maxPayload = random.nextUnit() < 0.2 ? 4_000 : 1 + Int(random.next() % 300)
        poisonChance = random.nextUnit() < 0.3 ? 0.02 * random.nextUnit() : 0
        damageChance = random.nextUnit() < 0.3 ? 0.2 * random.nextUnit() : 0
        chaosSteps = 100 + Int(random.next() % 600)
        // Drawn last, so that the seeds before it draw the same worlds as they did.
        world.destination.declaredCapacity = random.nextUnit() < 0.3 ? 1 + Int(random.next() % 64) : nil
        self.random = random
    }

    var summary: Summary {
        Summary(steps: step, written: world.written, committed: world.committed, requests: requests, hedges: machine.stats.hedges, damageRecorded: world.damageRecorded.count, stopped: stopped, trace: trace)
    }
}
