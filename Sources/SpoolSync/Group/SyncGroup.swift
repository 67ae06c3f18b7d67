import Foundation
import Logging
import Spool

/// One sync worker for a group of writer logs (`LogGroup`): an app and its extensions, each
/// appending to its own log in a shared directory, drained by one process.
///
/// Each writer log gets a `DetachedConsumer` of its own (named `consumer`, created at the
/// oldest record on first sight) and a ``SyncWorker`` of its own on it, all with the same
/// configuration and the same kind of destination (`makeSink` makes one per log, so each
/// request names its log: `Spool-Batch` for the HTTP envelope). So every policy holds for
/// each log exactly as for one: the window, retries, `Retry-After`, 413 splits, dead letters
/// (in each log's `deadletter/<consumer>`), and the rule that a log's offset moves only past
/// what the destination accepted. Each log's offset is committed separately, and each
/// writer's retention honours it.
///
/// **Fairness.** Each log has its own window of requests in flight, so a chatty writer (a
/// widget appending thousands of events) never holds the app's records back: the app's
/// requests go out beside the widget's, never behind them. The cost is that as many
/// windows run as there are logs: at most `logs ×` the concurrency's maximum in flight.
///
/// **New writers.** A writer log that appears while the group runs is picked up within
/// `discoveryInterval` (and at every ``flush(retries:throughCurrentEnd:)``).
///
/// **Metrics.** Each worker's `spool_sync_*` metrics carry `consumer="<writer>/<consumer>"`.
///
/// **Suspension.** On Apple platforms the app stops the group (``stop()``) before it is
/// suspended, since its consumers hold locks in the shared container, and makes a new one
/// when it is active again; a stopped group never starts again.
public actor SyncGroup {
    /// The group's directory.
    public nonisolated let directory: String
    /// The consumer each writer log is drained through.
    public nonisolated let consumerName: String
    private let logConfiguration: Configuration
    private let configuration: SyncConfiguration
    private let makeSink: @Sendable (any LogConsumer) throws -> any SyncSink
    private let discoveryInterval: Duration
    private let logger: Logger
    private var members: [String: Member] = [:]
    private var running = false
    private var stopped = false
    private var discovery: Task<Void, Never>?

    private struct Member {
        let consumer: DetachedConsumer
        let worker: SyncWorker<ContinuousClock>
    }

    /// A group worker for the writer logs of `directory`; it does nothing until ``start()``
    /// or a flush.
    /// - Parameters:
    ///   - directory: the group's directory (`LogGroup`); writer logs are found in its
    ///     `writers/`.
    ///   - consumer: the consumer each writer log is drained through; 1 to 64 characters
    ///     from `A-Z a-z 0-9 . _ -`.
    ///   - logConfiguration: what the consumers need to read the logs: keys, expiry rules,
    ///     file modes.
    ///   - configuration: the sync policies, the same for every log; validated here.
    ///   - discoveryInterval: how often a running group looks for new writer logs.
    ///   - logger: where the group and its workers log; never payloads.
    ///   - makeSink: the destination for one writer log (called once per log, with its
    ///     consumer): ``HTTPSink`` with the log's id, `PubSubSink`, `PostgresSink`, or your own.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        directory: String, consumer: String = "sync", logConfiguration: Configuration = Configuration(),
        configuration: SyncConfiguration = .init(), discoveryInterval: Duration = .seconds(1),
        logger: Logger = Logger(label: "spool.sync"),
        sink makeSink: @escaping @Sendable (any LogConsumer) throws -> any SyncSink
    ) throws(SyncError) {
        try configuration.validate()
        guard discoveryInterval > .zero else {
            throw SyncError(.invalidConfiguration, "discoveryInterval must be positive, not \(discoveryInterval)")
        }
        self.directory = directory
        self.consumerName = consumer
        self.logConfiguration = logConfiguration
        self.configuration = configuration
        self.discoveryInterval = discoveryInterval
        self.logger = logger
        self.makeSink = makeSink
    }

    /// A group worker posting Spool's envelope to `url` with the platform's uploader, one
    /// ``HTTPSink`` per writer log, as ``init(directory:consumer:logConfiguration:configuration:discoveryInterval:logger:sink:)``.
    /// - Parameters:
    ///   - directory: the group's directory.
    ///   - url: the collector's URL.
    ///   - consumer: the consumer each writer log is drained through.
    ///   - logConfiguration: what the consumers need to read the logs.
    ///   - configuration: the sync policies; validated here.
    ///   - logger: where the group logs; never payloads.
    /// - Throws: ``SyncError/Code/invalidConfiguration`` naming the bad field.
    public init(
        directory: String, url: URL, consumer: String = "sync", logConfiguration: Configuration = Configuration(),
        configuration: SyncConfiguration = .init(), logger: Logger = Logger(label: "spool.sync")
    ) throws(SyncError) {
        try self.init(directory: directory, consumer: consumer, logConfiguration: logConfiguration,
                      configuration: configuration, logger: logger) { consumer in
            HTTPSink(uploader: platformUploader(url: url), logID: consumer.logID, configuration: configuration)
        }
    }

    /// The writers being drained, by name.
    public var writers: [String] { members.keys.sorted() }

    /// Each writer log's counters, by writer name.
    public var stats: [String: SyncStats] {
        get async {
            var result: [String: SyncStats] = [:]
            for (name, member) in members { result[name] = await member.worker.stats }
            return result
        }
    }

    /// Looks for writer logs not drained yet and makes a consumer and a worker for each (a
    /// running group starts them). A writer log that cannot be opened yet (its writer is
    /// creating it) is tried again at the next look; one whose consumer another process holds
    /// is reported.
    /// - Returns: the writers added, and those that could not be opened, with why.
    @discardableResult
    public func refresh() async -> GroupRefresh {
        var refresh = GroupRefresh()
        guard !stopped else { return refresh }
        let found: [String]
        do {
            let directory = self.directory
            found = try await offload { try LogGroup.writers(in: directory) }
        } catch {
            refresh.failed["writers/"] = error as? SpoolError ?? SpoolError(.io, "\(error)", path: directory)
            return refresh
        }
        for name in found where members[name] == nil {
            do {
                let member = try await makeMember(name)
                // Stopped meanwhile (the look ran off the actor): do not leave it running.
                guard !stopped, members[name] == nil else {
                    await member.worker.stop()
                    member.consumer.close()
                    continue
                }
                members[name] = member
                refresh.added.append(name)
                if running { await member.worker.start() }
                logger.info("draining writer log", metadata: ["writer": "\(name)", "log": "\(member.consumer.logID)"])
            } catch {
                refresh.failed[name] = error
            }
        }
        return refresh
    }

    private func makeMember(_ name: String) async throws -> Member {
        let path = try LogGroup.directory(group: directory, writer: name)
        let consumerName = self.consumerName
        let logConfiguration = self.logConfiguration
        var logger = self.logger
        logger[metadataKey: "spool.writer"] = "\(name)"
        let consumerLogger = logger
        let consumer = try await offload {
            try DetachedConsumer(directory: path, name: consumerName, creating: true, configuration: logConfiguration, logger: consumerLogger)
        }
        do {
            let worker = try SyncWorker(consumer: consumer, label: "\(name)/\(consumerName)", sink: try makeSink(consumer),
                                        configuration: configuration, logger: logger)
            return Member(consumer: consumer, worker: worker)
        } catch {
            consumer.close()
            throw error
        }
    }

    /// Starts every worker, and looks for new writer logs every `discoveryInterval`. Calling
    /// it again, or after ``stop()``, does nothing.
    /// - Returns: what the first look found.
    @discardableResult
    public func start() async -> GroupRefresh {
        guard !running, !stopped else { return GroupRefresh() }
        running = true
        let refresh = await self.refresh()
        for member in members.values { await member.worker.start() }
        let interval = discoveryInterval
        discovery = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let self, !Task.isCancelled else { return }
                let found = await self.refresh()
                for (name, error) in found.failed { await self.logFailure(name, error) }
            }
        }
        return refresh
    }

    private func logFailure(_ name: String, _ error: any Error) {
        logger.warning("cannot drain writer log yet; trying again", metadata: ["writer": "\(name)", "error": "\(error)"])
    }

    /// Drains every writer log at once (looking for new ones first), each as
    /// ``SyncWorker/flush(deadline:retries:)`` drains one, and returns when all have ended.
    /// - Parameters:
    ///   - retries: retries of a failing request, per log, as for one worker.
    ///   - throughCurrentEnd: drain each log only up to the end it has now (`spool sync --once`
    ///     beside writers that keep appending), as ``SyncWorker/flush(through:retries:)``.
    /// - Returns: each writer's report and their sum.
    public func flush(retries: Int = 0, throughCurrentEnd: Bool = false) async -> GroupFlushReport {
        let refresh = await self.refresh()
        let members = self.members
        var report = GroupFlushReport()
        report.unopened = refresh.failed
        await withTaskGroup(of: (String, FlushReport).self) { group in
            for (name, member) in members {
                group.addTask {
                    if throughCurrentEnd {
                        let stats = await member.worker.stats
                        return (name, await member.worker.flush(through: stats.committed + stats.pending, retries: retries))
                    }
                    return (name, await member.worker.flush(retries: retries))
                }
            }
            for await (name, one) in group { report.writers[name] = one }
        }
        return report
    }

    /// Stops every worker (as ``SyncWorker/stop()``) and closes every consumer, releasing
    /// their locks. A stopped group never starts again.
    public func stop() async {
        stopped = true
        running = false
        discovery?.cancel()
        discovery = nil
        for member in members.values {
            await member.worker.stop()
            member.consumer.close()
        }
    }
}

/// What ``SyncGroup/refresh()`` found.
public struct GroupRefresh: Sendable {
    /// Writers drained from now on.
    public var added: [String] = []
    /// Writers whose logs could not be opened, with why (tried again at the next look).
    public var failed: [String: any Error] = [:]
}

/// What ``SyncGroup/flush(retries:throughCurrentEnd:)`` did, per writer and in sum.
public struct GroupFlushReport: Sendable {
    /// Each writer's report, by writer name.
    public var writers: [String: FlushReport] = [:]
    /// Writers whose logs could not be opened, with why.
    public var unopened: [String: any Error] = [:]

    /// Batches accepted, over every writer.
    public var batches: Int { writers.values.reduce(0) { $0 + $1.batches } }
    /// Records accepted, over every writer.
    public var records: Int { writers.values.reduce(0) { $0 + $1.records } }
    /// Bytes of request bodies sent for them, over every writer.
    public var bytes: Int { writers.values.reduce(0) { $0 + $1.bytes } }
    /// Refused records moved to dead-letter logs, over every writer.
    public var deadLettered: Int { writers.values.reduce(0) { $0 + $1.deadLettered } }
    /// Records skipped as damaged (the logs could not read them), over every writer.
    public var damaged: DamageTally {
        writers.sorted { $0.key < $1.key }.reduce(into: DamageTally()) { $0.add($1.value.damaged) }
    }
    /// The first failure, by writer name, if any flush ended with one.
    public var failure: (writer: String, error: SyncError)? {
        writers.sorted { $0.key < $1.key }.lazy.compactMap { name, report in report.failure.map { (name, $0) } }.first
    }
}
