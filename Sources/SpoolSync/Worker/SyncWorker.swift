import Foundation
import Logging
import Metrics
import Spool

/// Uploads a consumer's records to a server in batches and commits them once accepted.
///
/// The policies live in a pure state machine; this actor is its thin driver: it carries out
/// the machine's actions (read, upload, dead-letter, commit, arm a timer) and feeds their
/// results back. The clock, the transport (``Uploader``) and the backoff's randomness are
/// injected, so every policy can be tested with a manual clock.
///
/// - Count: when `flushCount` records are pending, a flush starts.
/// - Interval: every `flushInterval` a flush starts (see ``setFlushInterval(_:)``).
/// - Manual: ``flush(deadline:retries:)`` drains and reports; ``dispatch(deadline:retries:onBatch:)``
///   also reports every request.
/// - Launch: ``start()`` sends at once whatever a previous run left.
/// - ``pause()`` / ``resume()`` stop and restart the automatic policies.
///
/// Records the log cannot read (damaged bytes) are never passed silently: with
/// ``SyncConfiguration/onDamage`` ``SyncConfiguration/DamagePolicy/skip`` each range is logged
/// at error level and recorded (``DeadLetterSink/recordDamage(_:consumer:)``) before the offset
/// passes it, then counted (``SyncStats/damaged``, ``FlushReport/damaged``) and reported to
/// ``dispatch(deadline:retries:onBatch:)`` as ``BatchResult/damaged(_:)``; with
/// ``SyncConfiguration/DamagePolicy/stop`` the worker stops before it (``SyncError/Code/damaged``).
///
/// Delivery is at least once: the offset moves only after a 2xx, through the records
/// accepted. A crash between the answer and the commit sends the batch again with the same
/// `Spool-Batch` header and record ids, so the server can drop the duplicates.
///
/// ## An iOS app
///
/// Stop the timer in the background, drain inside a background task while time remains,
/// and restart the timer when the app is active again (UIKit is not imported by Spool; this
/// is the wiring in the app):
///
/// ```swift
/// NotificationCenter.default.addObserver(forName: UIApplication.didEnterBackgroundNotification,
///                                        object: nil, queue: .main) { _ in
///     var task = UIBackgroundTaskIdentifier.invalid
///     task = UIApplication.shared.beginBackgroundTask { UIApplication.shared.endBackgroundTask(task) }
///     let budget = Duration.seconds(UIApplication.shared.backgroundTimeRemaining)
///     Task {
///         await worker.pause()
///         // Each request is cut to the time left; none starts with less than 1 s left.
///         await worker.flush(within: budget)
///         UIApplication.shared.endBackgroundTask(task)
///     }
/// }
/// NotificationCenter.default.addObserver(forName: UIApplication.didBecomeActiveNotification,
///                                        object: nil, queue: .main) { _ in
///     Task { await worker.resume() }
/// }
/// ```
///
/// Thread safety: an actor; call it from anywhere.
public actor SyncWorker<C: Clock> where C.Duration == Duration {
    private var machine: SyncStateMachine
    private let source: ConsumerSource
    private let sink: AnySink
    private let deadLetters: (any DeadLetterSink)?
    private let clock: C
    private let epoch: C.Instant
    private let random: @Sendable () -> Double
    private let logger: Logger
    private let metrics: SyncMetrics
    private var relay: WriteRelay?
    /// The log-write registration; cancelled by ``stop()``.
    private var observation: WriteObservation?
    private var nextFlushID = 0
    private var waiting: [Int: CheckedContinuation<FlushReport, Never>] = [:]
    private var batchHandlers: [Int: @Sendable (BatchResult) -> Void] = [:]
    private var timer: Task<Void, Never>?
    private var backoff: Task<Void, Never>?
    /// The wake-up of the earliest batch retried on its own.
    private var retryWake: Task<Void, Never>?
    /// The wake-ups of flushes with a deadline, by flush id; cancelled when a flush is answered.
    private var deadlines: [Int: Task<Void, Never>] = [:]
    /// The read, commit or dead-letter write in flight, if any.
    private var operation: Task<Void, Never>?
    /// The requests in flight, by slot (a hedged batch has two, each in its own slot).
    private var uploads: [Int: Task<Void, Never>] = [:]
    /// The teardown, once ``stop()`` (or a fatal answer) started it.
    private var teardown: Task<Void, Never>?

    /// The worker every initializer makes (the public ones are in `SyncWorker+Consumer.swift`),
    /// reading `source`; parameters as for
    /// ``init(consumer:sink:configuration:deadLetters:clock:random:logger:metricsFactory:)``.
    init(
        reading source: ConsumerSource,
        sink: some SyncSink,
        configuration: SyncConfiguration,
        deadLetters: (any DeadLetterSink)?,
        clock: C,
        random: @escaping @Sendable () -> Double,
        logger: Logger,
        metricsFactory: (any MetricsFactory)?
    ) throws(SyncError) {
        try configuration.validate()
        var configuration = configuration
        if let limit = sink.maxInFlight { configuration.concurrency = configuration.concurrency.bounded(by: limit) }
        var logger = logger
        logger[metadataKey: "spool.consumer"] = "\(source.consumerName)"
        self.machine = SyncStateMachine(
            configuration: configuration, committed: source.committed, pending: source.pendingRecords)
        self.source = source
        self.sink = AnySink(sink, logID: source.logID, epochs: source.consumer.epochs)
        self.deadLetters = deadLetters
        self.clock = clock
        self.epoch = clock.now
        self.random = random
        self.logger = logger
        self.metrics = SyncMetrics(consumer: source.consumerName, factory: metricsFactory)
        // From nothing to the start: the lag gauge shows what a previous run left.
        metrics.record(from: SyncStats(), to: machine.stats)
    }

    // MARK: Lifecycle

    /// Starts the automatic policies (interval timer, count trigger) and sends at once
    /// whatever is pending, such as what a previous run left. Calling it again does nothing,
    /// and so does calling it after ``stop()``: a stopped worker never starts again, and it
    /// must not register a write observer that nothing would cancel.
    public func start() {
        guard relay == nil, !machine.isStopped else { return }
        let relay = WriteRelay { [weak self] end in await self?.writesObserved(end) }
        self.relay = relay
        observation = source.watchWrites { end in relay.notify(end) }
        send(.start)
    }

    /// Stops for good: timers are cancelled, the requests in flight are abandoned (not committed),
    /// a commit or dead-letter write in flight is waited for, waiting flushes end with
    /// ``SyncError/Code/stopped``, and the dead-letter sink is shut down.
    public func stop() async {
        send(.stop)
        await tearDown().value
    }

    /// Cancels everything the worker runs, once: after ``stop()`` or a fatal answer.
    private func tearDown() -> Task<Void, Never> {
        if let teardown { return teardown }
        observation?.cancel()
        observation = nil
        timer?.cancel()
        backoff?.cancel()
        retryWake?.cancel()
        let running = Array(uploads.values)
        for upload in running { upload.cancel() }
        let task = Task { [operation, deadLetters, sink] in
            for upload in running { await upload.value }
            await operation?.value
            await deadLetters?.shutdown()
            await sink.shutdown()
        }
        teardown = task
        return task
    }

    /// Stops the automatic policies (the app went to the background): no timer, no count
    /// trigger, no automatic retry. A request in flight finishes and is committed. Manual
    /// flushes still work.
    public func pause() { send(.pause) }

    /// Restarts the automatic policies (the app is active again): the timer restarts, and a
    /// flush starts if a retry is owed or `flushCount` records are pending.
    public func resume() { send(.resume) }

    /// Changes the interval: a flush starts at once and the timer restarts with the new
    /// interval (Sensors Analytics' rule). A value ≤ 0 disables periodic flushing; a value
    /// below `minimumFlushInterval` is raised to it. While paused, it takes effect on resume.
    public func setFlushInterval(_ interval: Duration) { send(.setFlushInterval(interval)) }

    /// The interval as set (before the floor).
    public var flushInterval: Duration { machine.configuration.flushInterval }

    /// The counters so far.
    public var stats: SyncStats { machine.stats }

    // MARK: Flushing

    /// Drains: uploads batch after batch until nothing is pending, an upload fails (after
    /// `retries` retries with backoff), or the deadline is near. A log that keeps growing
    /// keeps it going: ``flush(through:retries:)`` stops at an offset instead.
    ///
    /// A flush starts at once, even during a backoff, unless the server asked to wait
    /// (`Retry-After`): then it starts when that time comes, or ends at once with the
    /// server's error if its deadline is sooner. It joins a drain already in progress.
    ///
    /// - Parameters:
    ///   - deadline: the flush returns by it. Each request's timeout is cut to the time left
    ///     before it (a budget shorter than `requestTimeout` is still used), and no request
    ///     starts when less than ``SyncConfiguration/minimumRequestTime`` (or `requestTimeout`,
    ///     if shorter) remains. A flush that joined a request already in flight (started by the
    ///     timer with the full `requestTimeout`) returns at its deadline with
    ///     ``FlushReport/deadlineReached``; that request goes on, and is committed if accepted,
    ///     so the offset is never half-committed.
    ///   - retries: how many times a retryable failure is retried inside this flush, after its
    ///     backoff (never sooner than the server's `Retry-After`), before the flush ends with it. The default is 0 (Sensors Analytics' rule:
    ///     a failure ends the flush; a running worker retries later by itself).
    /// - Returns: what was sent, and the failure that ended the flush, if any.
    @discardableResult
    public func flush(deadline: C.Instant? = nil, retries: Int = 0) async -> FlushReport {
        await request(deadline: deadline, retries: retries, onBatch: nil)
    }

    /// Drains up to `end` (records before it), then returns, however much is written after:
    /// `spool sync --once` passes the end of the log it saw when it started, so that a one-shot
    /// run beside a writer that keeps appending ends.
    ///
    /// - Parameters:
    ///   - end: the offset to reach; a flush with `end` at or below the committed offset returns
    ///     at once.
    ///   - retries: as for ``flush(deadline:retries:)``.
    /// - Returns: what was sent, and the failure that ended the flush, if any.
    @discardableResult
    public func flush(through end: UInt64, retries: Int = 0) async -> FlushReport {
        await request(deadline: nil, retries: retries, through: end, onBatch: nil)
    }

    /// ``flush(deadline:retries:)`` with a deadline `budget` from now (an iOS background task's
    /// remaining time, say).
    @discardableResult
    public func flush(within budget: Duration, retries: Int = 0) async -> FlushReport {
        await request(deadline: clock.now.advanced(by: budget), retries: retries, onBatch: nil)
    }

    /// Google Analytics' `dispatchWithCompletionHandler`: a flush that calls `onBatch` after
    /// every request with ``BatchResult/good`` (more may remain), ``BatchResult/noData`` (nothing
    /// is pending: done) or ``BatchResult/error(_:)``.
    ///
    /// `onBatch` is called on the worker: it must return quickly.
    @discardableResult
    public func dispatch(
        deadline: C.Instant? = nil, retries: Int = 0, onBatch: @escaping @Sendable (BatchResult) -> Void
    ) async -> FlushReport {
        await request(deadline: deadline, retries: retries, onBatch: onBatch)
    }

    /// ``dispatch(deadline:retries:onBatch:)`` with a deadline `budget` from now.
    @discardableResult
    public func dispatch(
        within budget: Duration, retries: Int = 0, onBatch: @escaping @Sendable (BatchResult) -> Void
    ) async -> FlushReport {
        await request(deadline: clock.now.advanced(by: budget), retries: retries, onBatch: onBatch)
    }

    private func request(
        deadline: C.Instant?, retries: Int, through: UInt64? = nil, onBatch: (@Sendable (BatchResult) -> Void)?
    ) async -> FlushReport {
        let id = nextFlushID
        nextFlushID += 1
        if let onBatch { batchHandlers[id] = onBatch }
        let offset = deadline.map { epoch.duration(to: $0) }
        return await withCheckedContinuation { continuation in
            waiting[id] = continuation
            send(.flushRequested(id: id, deadline: offset, retries: retries, through: through))
        }
    }

    /// The current wall-clock time, in seconds since 1970.
    @Sendable public static func systemWallClock() -> Double {
        Date().timeIntervalSince1970
    }

    // MARK: Driving the machine

    private var now: Duration { epoch.duration(to: clock.now) }

    private func writesObserved(_ end: UInt64) { send(.recordsWritten(end: end)) }

    private func send(_ event: SyncStateMachine.Event) {
        let before = machine.stats
        let actions = machine.handle(event, now: now, jitter: random())
        metrics.record(from: before, to: machine.stats)
        for action in actions { perform(action) }
    }

    private func perform(_ action: SyncStateMachine.Action) {
        switch action {
        case .read(let from, let count, let bytes, let batches, let maxCount, let maxBytes):
            run { [source, sink] in
                do {
                    // The window's records again (a consumer reads from its committed offset),
                    // then new ones, cut into batches from `from` on.
                    let read = try await source.read(maxCount: count, maxBytes: bytes)
                    return .readCompleted(sink.prepare(read, from: from, maxCount: maxCount, maxBytes: maxBytes, batches: batches))
                } catch {
                    return .readFailed(SyncError(.readFailed, "reading the consumer failed", cause: error))
                }
            }
        case .upload(let batch, let slot, let timeout):
            uploads[slot] = Task { [sink, clock, logger] in
                let request = await Self.request(for: batch, sink)
                let outcome = await timedSend(clock: clock, timeout: timeout) { await sink.send(request, timeout: timeout) }
                logger.debug("request answered", metadata: [
                    "spool.records": "\(batch.records.first?.seq ?? batch.end)..<\(batch.end)", "spool.bytes": "\(request.bytes)",
                    "spool.outcome": "\(outcome)"])
                self.uploadFinished(slot: slot, outcome, bytes: request.bytes, declaredCapacity: sink.declaredCapacity())
            }
        case .deadLetter(let records, let error):
            run { [deadLetters] in
                do {
                    try await deadLetters?.store(records, refusedWith: error)
                    return .deadLetterCompleted
                } catch {
                    return .deadLetterFailed(SyncError(.deadLetterFailed, "writing refused records to the dead-letter log failed", cause: error))
                }
            }
        case .recordDamage(let ranges):
            for range in ranges {
                logger.error("skipping records the log cannot read (damaged); they are lost", metadata: [
                    "spool.records": "\(range.seqs.lowerBound)..<\(range.seqs.upperBound)", "spool.count": "\(range.records)",
                    "spool.segment": "\(range.segment)", "spool.reason": "\(range.reason)"])
            }
            run { [deadLetters, source] in
                do {
                    try await deadLetters?.recordDamage(ranges, consumer: source.consumerName)
                    return .damageRecorded
                } catch {
                    return .damageRecordFailed(SyncError(.deadLetterFailed, "recording the damaged records skipped failed", cause: error))
                }
            }
        case .commit(let end):
            run { [source] in
                do {
                    try await source.commit(upTo: end)
                    return .commitCompleted
                } catch {
                    return .commitFailed(SyncError(.commitFailed, "committing the consumer through \(end) failed", cause: error))
                }
            }
        case .scheduleTimer(let at, let generation):
            timer?.cancel()
            timer = wake(at: at, .timerFired(generation: generation))
        case .cancelTimer:
            timer?.cancel()
            timer = nil
        case .backoff(let until, let generation):
            backoff?.cancel()
            backoff = wake(at: until, .backoffExpired(generation: generation))
            logger.debug("backing off", metadata: ["spool.until": "\(until)"])
        case .scheduleWake(let at):
            retryWake?.cancel()
            retryWake = wake(at: at, .wake)
        case .notify(let ids, let result):
            for id in ids { batchHandlers[id]?(result) }
        case .scheduleDeadline(let id, let at):
            deadlines[id] = wake(at: at, .flushDeadlinePassed(id: id))
        case .finishFlush(let id, let report):
            deadlines.removeValue(forKey: id)?.cancel()
            batchHandlers[id] = nil
            waiting.removeValue(forKey: id)?.resume(returning: report)
        case .shutDown:
            _ = tearDown()
        case .logRefusal(let error, let records):
            logger.info(
                "server refused records; moving them to the dead-letter log",
                metadata: ["spool.status": "\(error.status ?? 0)", "spool.records": "\(records)", "spool.reason": "\(error.message)"])
        }
    }

    /// The batch's request: built when it was read, or now for a half of a split batch, off
    /// the worker's actor (encoding and compressing are pure CPU work).
    private nonisolated static func request(for batch: SyncBatch, _ sink: AnySink) async -> SinkRequest<any Sendable> {
        sink.request(for: batch)
    }

    private func uploadFinished(slot: Int, _ outcome: SinkOutcome, bytes: Int, declaredCapacity: Int?) {
        uploads[slot] = nil
        send(.uploadCompleted(slot: slot, outcome, bytes: bytes, declaredCapacity: declaredCapacity))
    }

    /// Runs the read, commit or dead-letter write in flight; `body` runs off the actor and
    /// returns the event its result makes.
    private func run(_ body: @escaping @Sendable () async -> SyncStateMachine.Event) {
        operation = Task {
            let event = await body()
            self.send(event)
        }
    }

    /// Sends `event` at `offset` unless cancelled first (a stale fire is ignored by the
    /// machine anyway, by its generation).
    private func wake(at offset: Duration, _ event: SyncStateMachine.Event) -> Task<Void, Never> {
        let deadline = epoch.advanced(by: offset)
        return Task { [clock] in
            do { try await clock.sleep(until: deadline, tolerance: nil) } catch { return }
            self.send(event)
        }
    }
}
