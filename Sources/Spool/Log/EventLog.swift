import Foundation
import Logging
import Metrics

/// An embedded, durable, append-only event log in one directory.
///
/// `append` is thread-safe and cheap: it copies the payload into the pending block under a
/// lock and returns the record's seq (dense, starting at 0, never reused). One dedicated
/// writer thread seals pending records into blocks (zstd-compressed, CRC-32C-checksummed),
/// writes each batch of blocks with one system call and, for the callers that ask for it,
/// makes it durable with one `fdatasync` shared by all of them (group commit).
///
/// Thread-safety: every method may be called from any thread or task. Blocking calls
/// (`appendBlocking`, `syncBlocking`, `close`, reads) must not run on Swift's cooperative pool;
/// use the `async` variants there.
///
/// Lifetime: call ``close()`` when done (or use ``withEventLog(directory:configuration:logger:_:)``);
/// the writer thread keeps the log alive until then.
public final class EventLog: @unchecked Sendable {
    /// The directory holding the log's files.
    public let directory: String
    /// The log's random 128-bit identity, made when it was created.
    public let id: LogID
    /// The ids its records are sent under: ``id``, then each epoch's from its first seq on,
    /// an epoch starting when the log is opened where it was not before (a copy or a restore
    /// of its directory; FORMAT.md §13).
    public let epochs: LogEpochs
    /// The validated configuration the log runs with.
    public let configuration: Configuration
    /// What opening found and repaired.
    public let recoveryReport: RecoveryReport

    let logger: Logger
    let lock = ConditionLock()
    /// Guarded by `lock`, which already makes every access exclusive: Swift's dynamic
    /// exclusivity check on this property (a thread-local access set, on each of the several
    /// accesses an append makes) is left out, as it cost about 3% of a sealing run's time.
    @exclusivity(unchecked) var state: LogState
    let metrics: LogMetrics
    let directoryLock: DirectoryLock
    /// Serialises ``close()``, ``suspend()`` and ``resume()``: each releases or takes the
    /// log's files as a whole.
    let lifecycle = RankedLock(.lifecycle)
    /// Where an idle log suspends itself (`Configuration.suspendsWhenIdle`): not the writer
    /// thread, which `suspend()` waits for.
    let lifecycleQueue = DispatchQueue(label: "spool.lifecycle", qos: .utility)
    let writer: SegmentWriter
    let consumerCache = ConsumerCache()
    /// Where retention runs after a roll (``scheduleRetention()``): a serial queue for
    /// blocking work, never the writer thread nor Swift's cooperative pool.
    let retentionQueue = DispatchQueue(label: "spool.retention", qos: .utility)
    /// Dictionaries and keys, shared by the writer, readers and the training thread.
    let codec: LogCodec
    /// Held while a sealed segment's file is unlinked or replaced (``deleteSegments(_:removed:)``,
    /// a cold rewrite's rename): a rewrite never puts back a file retention or the cap took.
    let segmentFiles = RankedLock(.segmentFiles)
    /// Held while room is made under the cap (``enforceCapBeforeWriting(activeSizeAfter:)``,
    /// ``makeRoomForRewrite(growingTo:)``): two at once would drop for the same bytes twice.
    let capLock = RankedLock(.cap)
    /// Cold recompression's thread and what it has settled (``Configuration/coldCompression``).
    let recompressor = Recompressor()

    /// Opens the log in `directory`, creating it (mode 0700) if needed, and recovers it.
    ///
    /// Takes an exclusive lock on the directory, scans only the active segment, truncates a
    /// torn last block (reported in ``recoveryReport``) and starts the writer thread.
    /// - Parameters:
    ///   - directory: the log's directory (created, mode 0700, when missing).
    ///   - configuration: the log's settings; validated here.
    ///   - logger: where the log logs (recovery, drops, failures), never payloads.
    ///   - metricsFactory: where the `spool_*` metrics go; the process-wide `MetricsSystem`
    ///     when nil (the default).
    /// - Throws: ``SpoolError`` `.invalidConfiguration` naming the field; `.locked` if another
    ///   `EventLog` holds the directory; `.io`/`.diskFull` for system errors; `.unsupportedVersion`
    ///   for files from a newer format.
    public static func open(directory: String, configuration: Configuration = Configuration(),
                            logger: Logger = Logger(label: "spool"), metricsFactory: (any MetricsFactory)? = nil) throws -> EventLog {
        try configuration.validate()
        try DirectoryIO.create(directory, permissions: configuration.directoryMode)
        let directoryLock = try DirectoryLock(directory: directory, permissions: configuration.fileMode)
        do {
            let recovered = try Recovery.recover(directory: directory, configuration: configuration, logger: logger)
            return try EventLog(directory: directory, configuration: configuration, logger: logger,
                                directoryLock: directoryLock, recovered: recovered, metricsFactory: metricsFactory)
        } catch {
            directoryLock.release()
            throw error
        }
    }

    private init(directory: String, configuration: Configuration, logger: Logger,
                 directoryLock: DirectoryLock, recovered: RecoveredLog, metricsFactory: (any MetricsFactory)?) throws {
        self.directory = directory
        self.configuration = configuration
        self.logger = logger
        self.directoryLock = directoryLock
        self.id = recovered.meta.logID
        self.recoveryReport = recovered.report
        // Seqs are never reused: not even one a consumer saw before a power loss cut the tail.
        let nextSeq = max(recovered.endSeq, recovered.consumerOffsets.values.max() ?? 0)
        // Before any append: a copy of the directory opened here starts its records' new ids at `nextSeq`.
        self.epochs = try LogEpochs.settle(directory: directory, base: recovered.meta.logID, nextSeq: nextSeq,
                                           permissions: configuration.fileMode, logger: logger)
        var segments = recovered.segments
        let codec = try LogCodec(directory: directory, configuration: configuration, logID: recovered.meta.logID,
                                 inheritedThrough: segments.last?.baseSeq, logger: logger)
        try Recovery.repairConsumers(recovered, directory: directory, permissions: configuration.fileMode)
        let writer = try SegmentWriter(directory: directory, configuration: configuration, logID: recovered.meta.logID, codec: codec,
                                       active: segments.last, activeHeader: recovered.activeHeader,
                                       activeEndSeq: recovered.endSeq, nextSeq: nextSeq)
        if let replaced = writer.replacedEmptySegment { segments.removeAll { $0.baseSeq == replaced } }
        if let active = writer.activeSegment {
            if segments.last?.baseSeq == active.baseSeq {
                segments[segments.count - 1] = active
            } else {
                segments.append(active)
            }
        }
        self.writer = writer
        self.codec = codec
        self.state = LogState(nextSeq: nextSeq, segments: segments, blockSize: configuration.blockSize,
                              linger: UInt64(configuration.linger.wholeNanoseconds))  // validated 0 ... 60 s
        for (name, next) in recovered.consumerOffsets { self.state.recordCommit(of: name, at: next) }
        self.metrics = LogMetrics(directory: directory, factory: metricsFactory)
        // The gauges show the log as opened, before the first write or retention pass moves them.
        metrics.recordSegments(count: state.table.segments.count, diskBytes: state.table.diskBytes)
        let thread = Thread { [self] in self.writerLoop() }
        thread.name = "spool-writer"
        thread.qualityOfService = .userInitiated
        thread.start()
        let pipeline = Thread { [self] in self.pipelineLoop() }
        pipeline.name = "spool-pipeline"
        pipeline.qualityOfService = .userInitiated
        pipeline.start()
        scheduleRecompression()
        logger.debug("opened log", metadata: ["directory": "\(directory)", "id": "\(id)", "nextSeq": "\(nextSeq)"])
    }

    /// The seq the next `append` will get (one past the last appended record).
    public var nextSeq: UInt64 { lock.withLock { state.nextSeq } }
    /// The seq of the oldest record still stored.
    public var firstSeq: UInt64 { lock.withLock { state.firstSeq } }
    /// The end (exclusive) of the written records: every record below this seq has been
    /// written to a segment file.
    public var writtenEnd: UInt64 { lock.withLock { state.writtenEnd } }
    /// The end (exclusive) of the durable records: every record below this seq is durable.
    public var syncedEnd: UInt64 { lock.withLock { state.syncedEnd } }
    /// Why the log does not take appends now, or nil while it does: the write error the writer
    /// is retrying (`.diskFull`, `.io`: nil again once a retry succeeds), `.failed` after an
    /// `fdatasync` failed (until the log is reopened), or `.closed`. A health check reads it
    /// (`spool collector`'s `/healthz`). Takes the log's lock; no I/O.
    public var writeError: SpoolError? { lock.withLock { state.status.error } }

    /// Registers `handler`, called after each batch of blocks is written, with the seq just
    /// past the last written record, on the thread that wrote the batch (the writer thread, or
    /// a blocking caller writing its own record). Keep it short and non-blocking.
    /// - Returns: the registration; ``WriteObservation/cancel()`` ends it (a sync worker that
    ///   stops cancels its own, so starting and stopping workers does not pile up handlers).
    @discardableResult
    public func observeWrites(_ handler: @escaping @Sendable (UInt64) -> Void) -> WriteObservation {
        let id = lock.withLock { state.addObserver(handler) }
        return WriteObservation { [weak self] in
            guard let self else { return }
            self.lock.withLock { self.state.removeObserver(id) }
        }
    }

    /// Writes everything pending, stops the writer thread, and releases the directory lock.
    ///
    /// Blocking. Appends after `close` throw `.closed`. Closing twice is harmless.
    /// - Throws: the write error if pending records could not be written (their count is in the message).
    public func close() throws {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        var failure: SpoolError?
        // Only the first call closes; any other waits until it has (closing twice must never
        // release the directory lock's descriptor twice: the second close(2) would close
        // whatever file had been given that number since).
        let first = lock.withLock { () -> Bool in
            guard state.requestClose() else {
                while !state.status.closeFinished { lock.progressWait() }
                return false
            }
            lock.wakeWriter()
            while !state.group.writerExited || !state.group.pipelineExited || state.table.retentionsInFlight > 0 || state.table.rewrite != nil { lock.progressWait() }
            let unwritten = state.finishClosing()
            if !unwritten.isEmpty {
                failure = SpoolError(.io, "\(unwritten.count) appended records could not be written before close (records \(unwritten.lowerBound)..<\(unwritten.upperBound))", path: directory)
            }
            return true
        }
        guard first else { return }
        writer.sealAhead?.close()
        writer.close()
        codec.close()
        consumerCache.closeAll()
        directoryLock.release()
        lock.withLock {
            state.markCloseFinished()
            lock.broadcastProgress()
        }
        if let failure { throw failure }
    }

    /// The consumer named `name`, created (starting at the oldest stored record) if it does not exist.
    ///
    /// Names are 1 to 64 characters from `[A-Za-z0-9._-]`, not starting with a dot.
    /// Calling it twice with one name returns the same consumer.
    /// - Throws: `.invalidConsumerName`; `.io` if its offset file cannot be created.
    public func consumer(named name: String) throws -> Consumer {
        try consumerCache.consumer(named: name, log: self)
    }

    /// The names of the consumers that have an offset file.
    public var consumerNames: [String] {
        lock.withLock { state.table.consumerOffsets.keys.sorted() }
    }
}

/// Opens a log, runs `body`, and closes the log whatever happens.
///
/// - Parameters:
///   - directory: the log's directory, as for ``EventLog/open(directory:configuration:logger:metricsFactory:)``.
///   - configuration: the log's settings.
///   - logger: where the log logs, never payloads.
///   - body: what to do with the open log; its result is returned.
public func withEventLog<T>(directory: String, configuration: Configuration = Configuration(),
                            logger: Logger = Logger(label: "spool"), _ body: (EventLog) throws -> T) throws -> T {
    let log = try EventLog.open(directory: directory, configuration: configuration, logger: logger)
    do {
        let result = try body(log)
        try log.close()
        return result
    } catch {
        try? log.close()
        throw error
    }
}
