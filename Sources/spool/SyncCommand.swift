import ArgumentParser
import Dispatch
import Foundation
import Spool
import SpoolSync

/// `spool sync DIR --url URL`: runs the sync worker on a consumer of the log.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Deliver a consumer's records to a collector, Pub/Sub or PostgreSQL, committing what it accepts.",
        discussion: """
            Without --once the worker runs until interrupted (SIGINT or SIGTERM): it flushes every \
            --interval seconds, when --count records are pending, and at once for what a previous run \
            left; a refusal no retry can change (credentials, a missing table or topic) ends it with \
            the error and exit status 1. With --once it drains what the log holds when it starts (up to the end it sees then; \
            records a writer appends meanwhile wait for the next run) and exits: 0 when that is \
            delivered, 1 with the error when an upload still fails after --retries retries (or a \
            commit fails), 3 when the log held records it cannot read (damaged). Such records are \
            skipped: each range is logged at error level, counted in the summary (damaged), \
            recorded in DIR/deadletter/CONSUMER.damaged, and committed past, and a run without \
            --once goes on (exiting 3 when interrupted); --on-damage stop commits up to the first \
            and stops there instead (exit 3, the summary's failure naming the range). Records the server refuses \
            (4xx) go to the dead-letter log DIR/deadletter/CONSUMER, as their exact bytes and ids, which \
            `spool sync` of that directory sends again. \
            Beside a process that has the log open for writing (an app, `spool append`), or always \
            with --sidecar, it never opens the log for writing: it reads and commits the consumer \
            as a committer of its own (records are synced before they are sent), and the writer's \
            retention honours its offset; the writer may start, stop and crash meanwhile.
            """)

    @OptionGroup var log: LogDirectory

    @OptionGroup var metrics: MetricsOptions

    @OptionGroup var destination: DestinationOptions

    @Option(help: "The consumer to drain; it must exist unless --create (which starts it at the oldest record).")
    var consumer = "sync"

    @Flag(help: LogDirectory.createConsumerHelp)
    var create = false

    @Option(name: .customLong("batch-count"), help: "Most records per request (default 50; 1000 with --postgres).")
    var batchCount: Int?

    @Option(name: .customLong("batch-bytes"), help: "Most bytes per request: of encoded body, or of the records themselves with --postgres (default 524288).")
    var batchBytes: Int?

    @Option(help: "Seconds between periodic flushes; 0 or less disables them (default 15, at least 5).")
    var interval: Double?

    @Option(help: "Flush when this many records are pending (default 100).")
    var count: Int?

    @Option(help: "Body layout: json, ndjson or raw (default json).")
    var encoding: HTTPSink.Encoding?

    @Option(help: "Body compression: none, gzip or zstd (default none).")
    var compression: HTTPSink.Compression?

    @Option(name: .customLong("header"), help: "An extra request header, 'Name: value' (repeatable).")
    var headers: [String] = []

    @Option(help: "Seconds before a request times out (default 30).")
    var timeout: Double?

    @Flag(help: "Never open the log for writing, even when no other process has it open (run beside an app that appends).")
    var sidecar = false

    @Flag(help: "Drain up to the end of the log seen at start, then exit, instead of running until interrupted.")
    var once = false

    @Flag(help: """
        DIR is a group (DIR/writers/NAME, one log per writer process: an app and its extensions): \
        drain every writer log, each through its own consumer (created at its oldest record) and \
        window, committing each log's offset separately; writer logs that appear meanwhile are \
        picked up. Implies --sidecar and --create.
        """)
    var group = false

    @Option(name: .customLong("max-retry-after"),
            help: "The longest wait, in seconds, a server's Retry-After can impose before a retry (default 3600, or 60 with --once).")
    var maxRetryAfter: Double?

    @Option(help: "With --once: retries of a failing batch, with backoff, before giving up, whatever retries it (alone, the window going back, the halves of a split after a 413); hedges are not retries.")
    var retries = 5

    @Option(name: .customLong("on-damage"), help: "Records the log cannot read: 'skip' (the default: record, count and commit past them, exit 3) or 'stop' (commit up to them and stop).")
    var onDamage: SyncConfiguration.DamagePolicy = .skip

    @Option(help: """
        Requests in flight at once: 'adaptive' (the default: from 1 up to --max-concurrency, \
        halving on 429, 503 and timeouts) or a fixed number (1 keeps strict order).
        """)
    var concurrency: ConcurrencySetting = .adaptive

    @Option(name: .customLong("max-concurrency"), help: "The most requests in flight with --concurrency adaptive (default 32, at most 64).")
    var maxConcurrency: Int?

    @Option(help: """
        'on' (the default): a request holding the commit back that has been out longer than 95% \
        of the recent round trips is sent once more, and the first copy accepted counts (at most \
        5% more requests; never with --concurrency 1); 'off' where a repeated request costs.
        """)
    var hedge: HedgeSetting = .on

    @OptionGroup var output: JSONOption

    @OptionGroup var progress: ProgressOption

    @Option(name: .customLong("status-interval"),
            help: "Without --once: seconds between status lines on standard error (records sent, lag, failures), each printed only if records moved or requests failed since the last; 0 disables them.")
    var statusInterval: Double = 60

    func validate() throws {
        if group && log.writer != nil { throw ValidationError("--group drains every writer of DIR; --writer names one (give one of them)") }
        if destination.authorization != nil && headers.contains(where: { $0.lowercased().hasPrefix("authorization:") }) {
            throw ValidationError("--url carries credentials and --header gives an Authorization header too; give one of them")
        }
        guard retries >= 0 else { throw ValidationError("--retries must not be negative") }
        if maxConcurrency != nil, case .fixed = concurrency {
            throw ValidationError("--max-concurrency goes with --concurrency adaptive; a fixed --concurrency is its own maximum")
        }
        // Checked before they become durations: converting inf, nan or a huge value traps.
        // Any value ≤ 0 disables the periodic flush, as in every anchor SDK.
        try Self.checkSeconds(interval, option: "--interval", range: -Self.maxIntervalSeconds...Self.maxIntervalSeconds)
        try Self.checkSeconds(timeout, option: "--timeout", range: 0.001...600)
        try Self.checkSeconds(maxRetryAfter, option: "--max-retry-after", range: 0...86_400)
        try Self.checkSeconds(statusInterval, option: "--status-interval", range: 0...Self.maxIntervalSeconds)
        do {
            try makeConfiguration().validate()
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        // First: the metrics system is bootstrapped before the log and the worker make theirs.
        let endpoint = try await metrics.start(for: "sync")
        do {
            try await sync()
        } catch {
            await endpoint?.stop()
            throw error
        }
        await endpoint?.stop()
    }

    private func sync() async throws {
        if group {
            try await syncGroup()
            return
        }
        let logger = commandLogger("spool.sync")
        let directory = log.directory
        let logDirectory = log
        let consumerName = consumer
        let create = self.create
        let beside = sidecar
        let opened = try await offload { try logDirectory.openConsumer(consumerName, creating: create, beside: beside) }
        let worker: SyncWorker<ContinuousClock>
        do {
            let configuration = try makeConfiguration()
            let sink = try destination.sink(logID: opened.consumer.logID, origins: OriginRecord.storesOrigins(at: directory), configuration: configuration)
            worker = try SyncWorker(consumer: opened.consumer, sink: sink, configuration: configuration, logger: logger)
        } catch {
            try? await offload { try opened.close() }
            throw error
        }
        let close: @Sendable () async throws -> Void = { try await offload { try opened.close() } }
        let failure: SyncError?
        if once {
            // Up to the end seen now: beside a writer that keeps appending, a one-shot run
            // (a cron job) must end.
            let start = await worker.stats
            let watch = SyncWatch.progress(progress.line("sync", unit: "records", total: start.pending)) { await worker.stats }
            let report = await worker.flush(through: start.committed + start.pending, retries: retries)
            watch.cancel()
            await watch.value
            try writeSummary(SyncSummary(records: report.records, batches: report.batches, bytes: report.bytes,
                                         deadLettered: report.deadLettered, stats: await worker.stats), failure: report.failure)
            failure = report.failure
        } else {
            await worker.start()
            Output.error("spool sync: uploading \(consumer) of \(directory) to \(destination.printable); interrupt to stop")
            let status = statusLines { await worker.stats }
            failure = await Self.waitForInterrupt { await worker.stats.fatalError }
            status?.cancel()
            try writeSummary(SyncSummary(await worker.stats), failure: failure)
        }
        let damaged = await worker.stats.damaged
        await worker.stop()
        try await close()
        try Self.exit(failure: failure.map { "\($0)" }, stoppedAtDamage: failure?.code == .damaged, damaged: damaged,
                      recordedIn: "\(directory)/deadletter/\(consumer).damaged")
    }

    /// Ends the run: exit 1 with `failure`; exit 3 when it stopped before damaged records
    /// (`--on-damage stop`) or skipped some (nothing else failed); else 0.
    private static func exit(failure: String?, stoppedAtDamage: Bool, damaged: DamageTally, recordedIn record: String) throws {
        if let failure { Output.error("spool sync: \(failure)") }
        if damaged.records > 0 {
            let ranges = damaged.rangeCount == 1 ? "1 range" : "\(damaged.rangeCount) ranges"
            Output.error("spool sync: skipped \(damaged.records) records the log cannot read (damaged), in \(ranges); recorded in \(record)")
        }
        if failure != nil && !stoppedAtDamage { throw ExitCode(1) }
        if stoppedAtDamage || damaged.records > 0 { throw ExitCode(Self.damageExitStatus) }
    }

    /// The exit status of a run that met damaged records and nothing else failed.
    static let damageExitStatus: Int32 = 3

    /// `--group`: one worker per writer log of DIR, as ``SyncGroup`` runs them.
    private func syncGroup() async throws {
        let directory = log.directory
        guard LogGroup.isGroup(directory) else {
            throw ValidationError("\(directory) is not a group: it has no writers/ directory (`spool append DIR --writer NAME` makes one)")
        }
        let configuration = try makeConfiguration()
        let destination = self.destination
        let keys = try log.keys()
        var logConfiguration = Configuration()
        if let keys { logConfiguration.encryption = .init(keys: keys, current: nil) }
        let group = try SyncGroup(directory: directory, consumer: consumer, logConfiguration: logConfiguration,
                                  configuration: configuration, logger: commandLogger("spool.sync")) { consumer in
            try destination.sink(logID: consumer.logID, origins: OriginRecord.storesOrigins(at: consumer.directory), configuration: configuration)
        }
        let failure: String?
        if once {
            let pending = await group.stats.values.reduce(0) { $0 + $1.pending }
            let watch = SyncWatch.progress(progress.line("sync", unit: "records", total: pending)) { Self.sum(await group.stats.values) }
            let report = await group.flush(retries: retries, throughCurrentEnd: true)
            watch.cancel()
            await watch.value
            let stats = await group.stats
            let summary = GroupSyncSummary(
                writers: report.writers.sorted(by: { $0.key < $1.key }).compactMap { name, one in
                    stats[name].map { SyncSummary(writer: name, records: one.records, batches: one.batches, bytes: one.bytes, deadLettered: one.deadLettered, stats: $0) }
                },
                unopened: report.unopened.sorted(by: { $0.key < $1.key }).map { UnopenedWriter(writer: $0.key, cause: $0.value) },
                total: SyncSummary(records: report.records, batches: report.batches, bytes: report.bytes, deadLettered: report.deadLettered, stats: Self.sum(stats.values)))
            failure = report.failure.map { "writer \($0.writer): \($0.error)" }
                ?? report.unopened.sorted(by: { $0.key < $1.key }).first.map { "writer \($0.key): \($0.value)" }
            try output.json ? Output.writeJSON(FailedSync(summary: summary, failure: failure)) : Output.write(summary.text)
        } else {
            let found = await group.start()
            for (name, error) in found.failed { Output.error("spool sync: writer \(name) not drained yet: \(error)") }
            Output.error("spool sync: uploading every writer log of \(directory) (\(await group.writers.count) now) to \(destination.printable); interrupt to stop")
            let status = statusLines { Self.sum(await group.stats.values) }
            failure = await Self.waitForInterrupt {
                let stats = await group.stats
                return stats.keys.sorted().lazy.compactMap { name in stats[name]?.fatalError.map { "writer \(name): \($0)" } }.first
            }
            status?.cancel()
            let all = await group.stats
            let stats = Self.sum(all.values)
            let summary = GroupSyncSummary(writers: all.sorted { $0.key < $1.key }.map { SyncSummary(writer: $0.key, $0.value) },
                                           unopened: [], total: SyncSummary(stats))
            try output.json ? Output.writeJSON(FailedSync(summary: summary, failure: failure)) : Output.write("total: " + summary.total.text)
        }
        let stats = await group.stats.values
        await group.stop()
        try Self.exit(failure: failure, stoppedAtDamage: stats.contains { $0.fatalError?.code == .damaged } && !stats.contains { $0.fatalError.map { $0.code != .damaged } ?? false },
                      damaged: Self.sum(stats).damaged, recordedIn: "\(directory)/writers/WRITER/deadletter/\(consumer).damaged")
    }

    /// The counters of several workers added up (the most in flight: of any one of them; the
    /// last error is left out).
    private static func sum(_ all: some Sequence<SyncStats>) -> SyncStats {
        var total = SyncStats()
        for one in all {
            total.records += one.records
            total.batches += one.batches
            total.bytes += one.bytes
            total.deadLettered += one.deadLettered
            total.requests += one.requests
            total.retries += one.retries
            total.hedges += one.hedges
            total.peakInFlight = max(total.peakInFlight, one.peakInFlight)
            total.concurrencyDecreases += one.concurrencyDecreases
            total.pending += one.pending
            total.failures.merge(one.failures, uniquingKeysWith: +)
            total.damaged.add(one.damaged)
        }
        return total
    }

    /// The longest --interval accepted: a year, far past any useful period and far inside
    /// what a `Duration` in milliseconds holds.
    static let maxIntervalSeconds: Double = 365 * 86_400

    /// Refuses a seconds option that is not a finite number within `range`.
    private static func checkSeconds(_ value: Double?, option: String, range: ClosedRange<Double>) throws {
        guard let value else { return }
        guard value.isFinite, range.contains(value) else {
            let bounds = [range.lowerBound, range.upperBound].map { $0 == $0.rounded() ? String(Int($0)) : String($0) }
            throw ValidationError("\(option) must be a number of seconds between \(bounds[0]) and \(bounds[1]), not \(value)")
        }
    }

    private func makeConfiguration() throws(SyncError) -> SyncConfiguration {
        var configuration = SyncConfiguration()
        // A PostgreSQL transaction costs three round trips whatever its size: larger batches.
        if destination.postgres != nil { configuration.maxBatchCount = 1000 }
        if let batchCount { configuration.maxBatchCount = batchCount }
        if let batchBytes { configuration.maxBatchBytes = batchBytes }
        // Not rounded to milliseconds: a positive value below half a millisecond must stay
        // positive (raised to the minimum interval), not become 0, which disables the timer.
        if let interval { configuration.flushInterval = .seconds(interval) }
        if let count { configuration.flushCount = count }
        if let encoding { configuration.http.encoding = encoding }
        // A collector's log (marked by `spool collector --log`): its records carry their origin.
        configuration.http.forwardsOrigins = OriginRecord.storesOrigins(at: log.directory)
        if let compression { configuration.http.compression = compression }
        if let timeout { configuration.requestTimeout = .seconds(timeout) }
        if once { configuration.flushInterval = .zero }
        switch concurrency {
        case .fixed(let count): configuration.concurrency = .fixed(count)
        case .adaptive: configuration.concurrency = .adaptive(max: maxConcurrency ?? 32)
        }
        configuration.hedging = hedge == .on
        configuration.onDamage = onDamage
        // A one-shot run is someone waiting (a script, a cron job): a server's Retry-After may
        // hold it a minute per retry, not the service's hour, unless they say otherwise.
        if let seconds = maxRetryAfter ?? (once ? 60 : nil) { configuration.backoff.maxRetryAfter = .seconds(seconds) }
        if let authorization = destination.authorization { configuration.http.headers["Authorization"] = authorization }
        for header in headers {
            guard let colon = header.firstIndex(of: ":") else {
                throw SyncError(.invalidConfiguration, "--header '\(header)' is not 'Name: value'")
            }
            let name = header[..<colon].trimmingCharacters(in: .whitespaces)
            configuration.http.headers[name] = header[header.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return configuration
    }

    /// Returns `nil` on the first SIGINT or SIGTERM, or the failure that stopped the sync for
    /// good (a fatal destination error: credentials, a missing table or topic), which
    /// `failure` reports, checked every 200 ms: a service that can no longer deliver must end,
    /// non-zero, for its supervisor to see it (systemd's `Restart=on-failure`).
    private static func waitForInterrupt<Failure: Sendable>(or failure: @escaping @Sendable () async -> Failure?) async -> Failure? {
        let (events, continuation) = AsyncStream.makeStream(of: Int32.self)
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        let check: Int32 = 0  // no signal's number
        let ticker = Task {
            while (try? await Task.sleep(for: .milliseconds(200))) != nil { continuation.yield(check) }
        }
        var found: Failure?
        for await event in events {
            if event != check { break }
            found = await failure()
            if found != nil { break }
        }
        ticker.cancel()
        for source in sources { source.cancel() }
        return found
    }
}

/// `--concurrency`: a number, or `adaptive`.
enum ConcurrencySetting: ExpressibleByArgument, Equatable {
    case fixed(Int)
    case adaptive

    init?(argument: String) {
        if argument == "adaptive" {
            self = .adaptive
        } else if let count = Int(argument) {
            self = .fixed(count)
        } else {
            return nil
        }
    }

    var defaultValueDescription: String {
        switch self {
        case .fixed(let count): "\(count)"
        case .adaptive: "adaptive"
        }
    }
}

/// `--hedge`: whether slow requests holding the commit back are sent once more.
enum HedgeSetting: String, ExpressibleByArgument, CaseIterable {
    case on, off
}

extension HTTPSink.Encoding: ExpressibleByArgument {}
extension SyncConfiguration.DamagePolicy: ExpressibleByArgument {}
extension HTTPSink.Compression: ExpressibleByArgument {}
