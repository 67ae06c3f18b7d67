import ArgumentParser
import Dispatch
import Foundation
import Logging
import Spool
import SpoolCollector

/// `spool collector`: runs the reference collector until SIGINT or SIGTERM.
struct CollectorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collector",
        abstract: "Run the reference collector: an HTTP server that records uploaded batches.",
        discussion: """
            Accepts POSTed Spool batches on any path, drops duplicates (the same event id and \
            the same bytes; an id already stored with other bytes is stored as a conflict, \
            under an id of its own), and appends each unique record to --out as one NDJSON line and/or to the Spool log --log, where \
            a batch is synced (fdatasync, shared by concurrent requests) before its 200, and \
            answered 503 when it cannot be. Forward that log with `spool sync DIR --sidecar`: \
            each record keeps its device's id. With --auth-token-file, a POST without \
            'Authorization: Bearer <a token of the file>' is answered 401; the file is re-read \
            on SIGHUP and when it changes. A body holds of the body budget (--max-concurrent \
            times --max-body) only the bytes it has sent; a declared length past --max-body is \
            answered 413 at once; a body with no byte for 5 s, slower than --min-body-rate after \
            its first 5 s, or not whole within 30 s is answered 408. An answer that leaves more \
            than 64 KiB (or --max-body) of a body unread (a 401, 413, 408 or 503 before the body arrived) closes \
            the connection instead of reading the rest. A Transfer-Encoding other than chunked is \
            answered 501. GET /healthz answers 200 while the collector can store and keep up, \
            else 503 (it cannot store, or it refused every request for load for 5 s); GET /livez \
            answers 200 while the server runs. Prints the address it listens on, and its counts \
            when stopped with SIGINT or SIGTERM.
            """
    )

    @Option(help: "The address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "The port to listen on (0: any free port).")
    var port = 0

    @Option(name: .customLong("out"), help: ArgumentHelp("The NDJSON file that receives each unique record (created with mode 0600).", valueName: "file"))
    var output: String?

    @Option(name: .customLong("log"), help: ArgumentHelp(
        "A Spool log directory that receives each unique record with its origin, synced before the answer (created with mode 0700).",
        valueName: "dir"))
    var logDirectory: String?

    @Option(name: .customLong("auth-token-file"), help: ArgumentHelp(
        "A file of the bearer tokens accepted, one per line ended by a newline, each of 16 bytes or more, optionally followed by the only log ids it may write ('#' starts a comment; a file of the one line '!revoke-all' revokes all); re-read on SIGHUP and when it changes.",
        valueName: "file"))
    var authTokenFile: String?

    @Flag(help: "Refuse to start (rather than warn) when the token file may be read or written by its group or others, or the --log directory is group-writable or another user's; a world-writable --log directory is always refused.")
    var strictPermissions = false

    @Option(help: "The largest request body accepted, in bytes, before decompression.")
    var maxBody = CollectorConfiguration().maxBodyBytes

    @Option(help: "The largest request body accepted, in bytes, after decompression.")
    var maxDecoded = CollectorConfiguration().maxDecodedBytes

    @Option(help: "The largest record accepted, in bytes; a batch holding a larger one is answered 413 (the default is Spool's record limit).")
    var maxRecordBytes = CollectorConfiguration().maxRecordBytes

    @Option(help: "The most requests handled at once, said in every answer but the health probes' (Spool-Max-Concurrent-Requests); more are answered 503 (no Retry-After: a slot frees within a round trip).")
    var maxConcurrent = CollectorConfiguration().maxConcurrentRequests

    @Option(help: ArgumentHelp(
        "The slowest a body may arrive, in bytes per second, after its first 5 s; a slower one is answered 408 and its connection closed.",
        valueName: "bytes"))
    var minBodyRate = CollectorConfiguration().minBodyBytesPerSecond

    @Option(help: "The chance (0...1) that a request is answered --failure-status.")
    var failureRate = 0.0

    @Option(help: "The status of injected failures.")
    var failureStatus = 503

    @Option(name: .customLong("fail-every"), help: "Also answer every Nth request (the Nth, 2Nth, …) with --failure-status.")
    var failEvery: Int?

    @Option(help: "The Retry-After seconds sent with injected failures and 429s.")
    var retryAfter: Int?

    @Option(help: "The chance (0...1) that a request is answered 429 with Retry-After.")
    var rateLimitRate = 0.0

    @Option(help: "The chance (0...1) that a connection is closed without an answer.")
    var resetRate = 0.0

    @Option(help: "Milliseconds added before every answer.")
    var latencyMs = 0

    @Option(help: "A random extra delay of up to this many milliseconds.")
    var latencyJitterMs = 0

    @Option(help: "Answer 413 to bodies larger than this many bytes.")
    var payloadTooLargeAbove: Int?

    @Option(help: "Answer 400 to a batch with a record whose data contains this text.")
    var poisonMarker: String?

    @Option(help: "The seed of the fault-injection random sequence.")
    var seed: UInt64 = 0

    @Flag(help: "Log each request at debug level to standard error.")
    var verbose = false

    @OptionGroup var metrics: MetricsOptions

    func validate() throws {
        do {
            try makeConfiguration().validate()
        } catch {
            throw ValidationError("\(error)")
        }
    }

    func makeConfiguration() -> CollectorConfiguration {
        var configuration = CollectorConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.outputPath = output
        configuration.logDirectory = logDirectory
        configuration.authTokenFile = authTokenFile
        configuration.strictPermissions = strictPermissions
        configuration.maxBodyBytes = maxBody
        configuration.maxDecodedBytes = maxDecoded
        configuration.maxRecordBytes = maxRecordBytes
        configuration.maxConcurrentRequests = maxConcurrent
        configuration.minBodyBytesPerSecond = minBodyRate
        configuration.retainsRecords = false
        configuration.seed = seed
        configuration.faults.failureRate = failureRate
        configuration.faults.failureStatus = failureStatus
        configuration.faults.failEvery = failEvery
        configuration.faults.retryAfterSeconds = retryAfter
        configuration.faults.rateLimitRate = rateLimitRate
        configuration.faults.resetRate = resetRate
        configuration.faults.latency = .milliseconds(latencyMs)
        configuration.faults.latencyJitter = .milliseconds(latencyJitterMs)
        configuration.faults.payloadTooLargeAbove = payloadTooLargeAbove
        configuration.faults.poisonMarker = poisonMarker
        return configuration
    }

    func run() async throws {
        var logger = Logger(label: "spool.collector") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = verbose ? .debug : .warning
        let collector = Collector(configuration: makeConfiguration(), logger: logger)
        let endpoint = try await metrics.start(for: "collector") { [collector] in
            // `mirror` is made at the first scrape, after the metrics system is bootstrapped.
            Self.mirror.update(Self.totals(collector.stats))
        }
        if authTokenFile == nil && !Self.isLoopback(host) {
            Output.error("spool collector: warning: listening on \(host) without --auth-token-file: anyone who can reach it can write records")
        }
        let port = try await collector.start()
        let hangup = Self.reloadTokensOnHangup(collector)
        defer { hangup.cancel() }
        // Before the listening line: a parent that reads it may signal at once, and a SIGTERM
        // between the line and the handler would be ignored (lost), leaving the process running.
        let termination = TerminationSignals()
        Self.emit("listening on \(host):\(port)")

        let signal = await termination.next()
        logger.debug("stopping", metadata: ["signal": "\(signal)"])
        await collector.stop()
        await endpoint?.stop()
        let stats = collector.stats
        Self.emit(
            "received \(stats.received), duplicates \(stats.duplicates), conflicts \(stats.conflicts), rejected \(stats.rejectedRecords) records in \(stats.rejectedBatches) batches, "
                + "requests \(stats.requests), faults \(stats.faults.total) (failures \(stats.faults.failures), rate limited \(stats.faults.rateLimited), "
                + "resets \(stats.faults.resets), too large \(stats.faults.payloadTooLarge), poisoned \(stats.faults.poisoned))"
        )
    }

    /// Whether `host` names a loopback address only (`127.0.0.0/8`, `::1`, `localhost`).
    static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return name == "localhost" || name == "::1" || name.hasPrefix("127.")
    }

    /// Re-reads the token file on each SIGHUP (whose default action, ending the process, is
    /// turned off), saying on standard error how many tokens are in force (never one of them).
    static func reloadTokensOnHangup(_ collector: Collector) -> any DispatchSourceSignal {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGHUP, queue: DispatchQueue(label: "spool.collector.hangup"))
        source.setEventHandler {
            Task {
                do {
                    let count = try await collector.reloadAuthTokens()
                    if collector.configuration.authTokenFile != nil {
                        Output.error("spool collector: SIGHUP: \(count) tokens in force")
                    }
                } catch {
                    Output.error("spool collector: SIGHUP: the token file could not be re-read; the tokens in force stay: \(error)")
                }
            }
        }
        source.resume()
        TerminationSignals.waitUntilCaught([SIGHUP])
        return source
    }

    /// The collector's counters as `--metrics-port` serves them, brought up to date at each scrape.
    static let mirror = CounterMirror(labels: Array(totals(CollectorStats()).keys))

    static func totals(_ stats: CollectorStats) -> [String: Int] {
        [
            "spool_collector_requests_total": stats.requests,
            "spool_collector_overloaded_total": stats.overloaded,
            "spool_collector_accepted_batches_total": stats.acceptedBatches,
            "spool_collector_records_total": stats.received,
            "spool_collector_duplicates_total": stats.duplicates,
            "spool_collector_conflicts_total": stats.conflicts,
            "spool_collector_rejected_batches_total": stats.rejectedBatches,
            "spool_collector_rejected_records_total": stats.rejectedRecords,
            "spool_collector_body_bytes_total": stats.bodyBytes,
            "spool_collector_faults_total": stats.faults.total,
            "spool_collector_forgotten_logs_total": stats.forgottenLogs,
            "spool_collector_unauthorized_total": stats.unauthorized,
            "spool_collector_unstored_batches_total": stats.unstored,
        ]
    }

    /// Writes `line` to standard output at once (unbuffered: a parent process reads the port).
    static func emit(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

/// SIGINT and SIGTERM, their default actions turned off from ``init()`` on, so one that comes
/// before ``next()`` is waited for is kept, not lost.
final class TerminationSignals: @unchecked Sendable {
    private let received: AsyncStream<Int32>
    private let sources: [any DispatchSourceSignal]

    init() {
        let (received, continuation) = AsyncStream.makeStream(of: Int32.self)
        let queue = DispatchQueue(label: "spool.collector.signals")
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            sources.append(source)
        }
        self.received = received
        self.sources = sources
        Self.waitUntilCaught([SIGINT, SIGTERM])
    }

    /// Returns once `signals` have a handler (at most 2 s). libdispatch on Linux installs a
    /// signal source's handler asynchronously, on its manager thread; until it has, a signal
    /// turned to SIG_IGN would be lost (a SIGTERM sent right after the listening line left the
    /// collector running on a loaded machine). On Apple platforms kqueue sees ignored signals.
    static func waitUntilCaught(_ signals: [Int32]) {
        #if os(Linux)
        let mask = signals.reduce(UInt64(0)) { $0 | UInt64(1) << UInt64($1 - 1) }
        for _ in 0..<2000 {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let caught = status.split(separator: "\n").first { $0.hasPrefix("SigCgt:") }
                .flatMap { UInt64($0.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16) }
            guard let caught, caught & mask != mask else { return }
            usleep(1000)
        }
        #endif
    }

    /// The first signal received (SIGTERM if the stream ends).
    func next() async -> Int32 {
        var iterator = received.makeAsyncIterator()
        let number = await iterator.next() ?? SIGTERM
        sources.forEach { $0.cancel() }
        return number
    }
}
