import Dispatch
import Hummingbird
import Logging
import NIOCore
// Graceful shutdown of Hummingbird goes through its ServiceGroup. ServiceLifecycle comes in
// with Hummingbird; Package.swift should name it (see the collector's report).
import ServiceLifecycle
import Spool
import Synchronization

/// The reference collector: an HTTP server that accepts Spool batches, drops duplicates (the
/// same event id and the same bytes), and records what it received (in memory, optionally in an NDJSON file, and
/// optionally in a Spool log of ``OriginRecord``s, synced before the answer), with seeded
/// fault injection for testing uploaders, bearer tokens, and a health check.
///
/// ```swift
/// let collector = Collector(configuration: .init())
/// let port = try await collector.start()
/// // POST batches to http://127.0.0.1:\(port)/batch
/// await collector.stop()
/// print(collector.stats.received)
/// ```
///
/// The wire format it accepts, on `POST` to any path:
/// - `Spool-Batch: <log id>:<first seq>-<last seq>` on every request (32 lowercase hex digits).
/// - `Content-Type: application/json`: a JSON array of envelopes
///   `{"id":"<log id>-<seq>","seq":<seq>,"time":<ms>,"data":<any JSON>}`;
///   `application/x-ndjson`: the same envelopes, one per line; `application/json` with
///   `Spool-Encoding: raw`: a JSON array of the records themselves, element `i` being seq `first + i`.
/// - `Content-Encoding`: none, `gzip` or `zstd`.
/// - An envelope of a forwarded collector's log may add `"origin_id":"<log id>-<seq>"`,
///   `"origin_seq"` and `"origin_time"`: the record is then recorded under its origin (its
///   id, seq and time), not the envelope's.
/// - `GET /healthz`: 200 `{"status":"ok"}` while the collector can store and keep up, else 503
///   with the reason (``health``: it cannot store, or it has refused every request for load for
///   5 s); `GET /livez`: 200 `{"status":"alive"}` whenever the server answers at all (a
///   liveness probe that overload or a full disk never fails, so an orchestrator does not
///   restart a collector that only needs fewer requests). No token needed, never refused for load.
/// - Answers: 200 `{"accepted":N,"duplicates":M,"conflicts":C}` (with
///   ``CollectorConfiguration/logDirectory``, once the records are synced): `N` records stored,
///   `C` of them conflicts (an id already stored with other bytes, stored under an id of its
///   own: ``ReceivedRecord/conflict``), and `M` repeats of records stored (the same id and the
///   same bytes); 401 without a valid bearer token when
///   ``CollectorConfiguration/authTokenFile`` is set; 403 for a record of a log id its token's
///   line does not name, when it names any; 503 `Retry-After: 1` when the log cannot
///   store the batch; 400 `{"error":"…"}` for a malformed batch;
///   413 for a body past ``CollectorConfiguration/maxBodyBytes`` or, decompressed, past
///   ``CollectorConfiguration/maxDecodedBytes``, or for a record past
///   ``CollectorConfiguration/maxRecordBytes`` (a declared `Content-Length` past the limit at
///   once, before any of the body); 415 for an unknown type or coding; 501 for a
///   `Transfer-Encoding` other than `chunked`; 405 for other methods; 503 without `Retry-After`
///   past ``CollectorConfiguration/maxConcurrentRequests`` requests at once (or bodies being
///   read past their budget, each holding what it has sent); 408 for a body that stalls,
///   arrives slower than ``CollectorConfiguration/minBodyBytesPerSecond`` or takes longer than
///   ``CollectorConfiguration/bodyTimeout``; 400 for a head NIO's parser refuses, 431 for a
///   head past 80 KiB, and a closed connection for a head slower than
///   ``CollectorConfiguration/headerTimeout``; and the faults of ``FaultConfiguration``. An
///   answer that leaves more than 64 KiB of its body unread says `Connection: close` and ends
///   the connection rather than reading the rest (so does one that leaves more than
///   ``CollectorConfiguration/maxBodyBytes``).
///
/// Thread safety: every method may be called from any task. Counters and records sit behind
/// one lock; what was received and the output file belong to one serial dispatch queue, which
/// fixes the order of records and keeps file I/O off the cooperative pool.
public final class Collector: Sendable {
    /// The configuration the collector was made with.
    public let configuration: CollectorConfiguration
    let logger: Logger
    let tallies: Mutex<Tallies>
    let ledger: Mutex<Ledger>
    let queue = DispatchQueue(label: "spool.collector.ledger")
    /// Requests being handled once their bodies arrived, at most
    /// ``CollectorConfiguration/maxConcurrentRequests``.
    let inFlight = Mutex(0)
    /// The bytes of the bodies being read or handled, at most ``bodyBudget``.
    let bodyBytesHeld = Mutex(0)
    /// Whether every request has been refused for load lately (``health``).
    let saturation = Mutex(Saturation())
    private let lifecycle = Mutex(Lifecycle.idle)
    /// The tokens of ``CollectorConfiguration/authTokenFile``, if any.
    let tokens: TokenFile?
    /// The collector's log while it is open (the ledger owns it; the health check and the
    /// requests waiting for durability read it here, without the ledger's queue).
    let collectorLog = Mutex<EventLog?>(nil)

    private enum Lifecycle {
        case idle
        case running(ServiceGroup, Task<Void, any Error>)
        case stopping
        case stopped
    }

    /// Counters, records and the fault sequence, behind ``tallies``.
    struct Tallies {
        var stats = CollectorStats()
        var records: [ReceivedRecord] = []
        var faults: FaultInjector
    }

    /// Makes a collector; nothing happens until ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: the settings, validated by ``start()``.
    ///   - logger: where the collector logs, at debug and trace with counts only (never a
    ///     payload). The default discards everything.
    public init(configuration: CollectorConfiguration = .init(), logger: Logger = Logger(label: "spool.collector", factory: { _ in SwiftLogNoOpLogHandler() })) {
        self.configuration = configuration
        self.logger = logger
        self.tallies = Mutex(Tallies(faults: FaultInjector(faults: configuration.faults, seed: configuration.seed)))
        self.ledger = Mutex(Ledger(maxLogs: configuration.maxTrackedLogs))
        self.tokens = configuration.authTokenFile.map { TokenFile(path: $0, strictPermissions: configuration.strictPermissions, logger: logger) }
    }

    /// Validates the configuration, reads the token file, opens the output file and the log,
    /// and starts serving in a background task.
    ///
    /// - Returns: the port the server listens on (the one the system chose when
    ///   ``CollectorConfiguration/port`` is 0).
    /// - Throws: ``SpoolError`` with `.invalidConfiguration` for a bad configuration, a token
    ///   file with no token or a bad line (named by its number), a world-writable log directory,
    ///   or, with ``CollectorConfiguration/strictPermissions``, a token file others may read or
    ///   write or a log directory that is group-writable or another user's; or `.io` (or `.diskFull`) when
    ///   the token file cannot be read, the output file or the log cannot be opened, or the
    ///   address cannot be bound; `.invalidArgument` when the log directory holds a log of other
    ///   records; `.locked` when another process has it open. A collector whose start failed is
    ///   stopped, with nothing left open.
    /// - Precondition: called once per collector (a programmer error otherwise).
    public func start() async throws -> Int {
        try lifecycle.withLock { state in
            guard case .idle = state else { preconditionFailure("Collector.start() called twice") }
            state = .stopped
            try configuration.validate()
        }
        if let tokens { _ = try await tokens.reload() }
        do {
            if let path = configuration.outputPath {
                try await onLedgerQueue { ledger in try ledger.open(path: path) }
            }
            if let directory = configuration.logDirectory {
                let (logConfiguration, logger, strict) = (configuration.logConfiguration, logger, configuration.strictPermissions)
                let log = try await onLedgerQueue { ledger in
                    for problem in try FileSafety.checkLogDirectory(directory, strict: strict) {
                        logger.warning("\(problem)")
                    }
                    return try ledger.openLog(directory: directory, configuration: logConfiguration, logger: logger)
                }
                collectorLog.withLock { $0 = log }
            }
        } catch {
            collectorLog.withLock { $0 = nil }
            _ = try? await onLedgerQueue { ledger in try ledger.close() }
            throw error
        }
        if let tokens { tokens.watch(every: configuration.authTokenCheckInterval) }
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let (headerTimeout, maxBodyBytes) = (configuration.headerTimeout, configuration.maxBodyBytes)
        let application = Application(
            responder: CollectorResponder(collector: self),
            // A connection that sends nothing for `connectionIdleTimeout` (idle between
            // requests, or still owing a body after its 408) is closed; the margin lets a
            // stalled body get its 408 first (see `connectionIdleTimeout`). A request head
            // gets `headerTimeout`, one past the parser's limits a 431, and an answer that
            // leaves much of its body unread closes the connection (RequestHeadGuard).
            server: .http1(configuration: .init(
                additionalChannelHandlers: [RequestHeadGuard(headerTimeout: headerTimeout, maxBodyBytes: maxBodyBytes) { [self] in
                    tallies.withLock { $0.stats.requests += 1 }
                }],
                idleTimeout: TimeAmount.nanoseconds(configuration.connectionIdleTimeout.wholeNanoseconds))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger
        )
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let task = Task {
            defer { portContinuation.finish() }
            try await group.run()
        }
        lifecycle.withLock { $0 = .running(group, task) }
        for await port in ports {
            logger.debug("collector listening", metadata: ["host": "\(configuration.host)", "port": "\(port)"])
            return port
        }
        // The server ended before it listened: the address could not be bound.
        await stop()
        let reason: String
        do {
            try await task.value
            reason = "the server ended"
        } catch {
            reason = "\(error)"
        }
        throw SpoolError(.io, "the collector could not listen on \(configuration.host):\(configuration.port): \(reason)")
    }

    /// Stops the server gracefully: it stops accepting connections (``health`` says so from
    /// the start), requests in flight get up to ``CollectorConfiguration/shutdownGracePeriod``
    /// to be answered, then every connection is closed and the output file and the log are
    /// synced and closed. Does nothing if not running.
    ///
    /// When it returns, every record of every batch answered 200 is in the output file and the
    /// log, durably.
    public func stop() async {
        let running: (ServiceGroup, Task<Void, any Error>)? = lifecycle.withLock { state in
            guard case .running(let group, let task) = state else { return nil }
            state = .stopping
            return (group, task)
        }
        guard let (group, task) = running else { return }
        await group.triggerGracefulShutdown()
        let grace = configuration.shutdownGracePeriod
        let deadline = Task {
            try await Task.sleep(for: grace)
            task.cancel()
        }
        do {
            try await task.value
        } catch {
            logger.debug("collector server ended with an error", metadata: ["error": "\(error)"])
        }
        deadline.cancel()
        tokens?.stopWatching()
        collectorLog.withLock { $0 = nil }
        do {
            try await onLedgerQueue { ledger in try ledger.close() }
        } catch {
            logger.error("collector output or log could not be synced", metadata: ["error": "\(error)"])
        }
        lifecycle.withLock { $0 = .stopped }
        logger.debug("collector stopped")
    }

    /// Re-reads ``CollectorConfiguration/authTokenFile`` and puts its tokens in force
    /// (`spool collector` calls it on SIGHUP). The file is also re-read when it changes.
    ///
    /// - Returns: how many tokens are now in force (0 without a token file).
    /// - Throws: ``SpoolError`` `.io` when the file cannot be read, `.invalidConfiguration`
    ///   naming a bad line or when it holds no token (a file being rewritten in place, say);
    ///   the tokens in force then stay.
    @discardableResult
    public func reloadAuthTokens() async throws -> Int {
        guard let tokens else { return 0 }
        return try await tokens.reload()
    }

    /// Nil while the collector can take records, else why not: it is not running (or is
    /// stopping), or its log is closed or cannot be written (``EventLog/writeError``: a full
    /// disk, a failed sync), or it is saturated: it has refused every request for load (503, no
    /// request slot or no room in the body budget) for 5 s, none admitted meanwhile (a quiet
    /// 5 s or one admitted request ends it). `GET /healthz` answers 200 or 503 from it, so a
    /// load balancer takes a collector that cannot store or keep up out of rotation. Takes
    /// locks; no I/O.
    public var health: String? {
        let running = lifecycle.withLock { state -> Bool in
            if case .running = state { return true }
            return false
        }
        guard running else { return "the collector is not running" }
        if saturation.withLock({ $0.holds(at: .now) }) {
            return "every request for \(Saturation.window) was refused for load (\(configuration.maxConcurrentRequests) request slots)"
        }
        guard configuration.logDirectory != nil else { return nil }
        guard let log = collectorLog.withLock({ $0 }) else { return "the log is not open" }
        return log.writeError.map { "the log cannot be written: \($0.code)" }
    }

    /// What the collector has seen so far.
    public var stats: CollectorStats {
        tallies.withLock { $0.stats }
    }

    /// The unique records received, in the order they were recorded (empty when
    /// ``CollectorConfiguration/retainsRecords`` is false).
    public func records() -> [ReceivedRecord] {
        tallies.withLock { $0.records }
    }

    /// Runs `body` on the ledger's serial queue, with the ledger locked.
    func onLedgerQueue<T: Sendable>(_ body: @escaping @Sendable (inout Ledger) throws -> T) async throws -> T {
        try await offload(on: queue) { try self.ledger.withLock { try body(&$0) } }
    }
}
