import ArgumentParser
import Hummingbird
import Logging
import CoreMetrics
import Metrics
import Prometheus
import ServiceLifecycle
import Synchronization

/// `--metrics-port` and `--metrics-host`, shared by the commands that run as services.
struct MetricsOptions: ParsableArguments {
    @Option(name: .customLong("metrics-port"),
            help: "Serve the metrics in Prometheus' text format at http://HOST:PORT/metrics (0: any free port, printed on standard error).")
    var port: Int?

    @Option(name: .customLong("metrics-host"), help: "The address the metrics are served on (default 127.0.0.1: this machine only).")
    var host = "127.0.0.1"

    func validate() throws {
        if let port, !(0...65_535).contains(port) { throw ValidationError("--metrics-port must be between 0 and 65535, not \(port)") }
    }

    /// Starts the endpoint when `--metrics-port` was given: call it before any metric is made
    /// (before the log opens), since it bootstraps the process's `MetricsSystem`.
    ///
    /// - Parameters:
    ///   - command: names the command in the line printed on standard error.
    ///   - beforeScrape: runs before each scrape is answered (to bring derived figures up to date).
    func start(for command: String, beforeScrape: @escaping @Sendable () -> Void = {}) async throws -> MetricsEndpoint? {
        guard let port else { return nil }
        let endpoint = try await MetricsEndpoint.start(host: host, port: port, beforeScrape: beforeScrape)
        Output.error("spool \(command): metrics on http://\(host):\(endpoint.port)/metrics")
        return endpoint
    }
}

/// The process's metrics (`spool_*`, `spool_sync_*`, `spool_collector_*`) served over HTTP
/// in Prometheus' text exposition format, from swift-prometheus's registry.
struct MetricsEndpoint: Sendable {
    let registry: PrometheusCollectorRegistry
    let port: Int
    private let group: ServiceGroup
    private let server: Task<Void, any Error>

    /// Bootstraps `MetricsSystem` with a Prometheus registry and serves `GET /metrics`.
    /// Returns once the port is bound, or throws if it cannot be.
    static func start(host: String, port: Int, beforeScrape: @escaping @Sendable () -> Void) async throws -> MetricsEndpoint {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let router = Router()
        router.get("metrics") { _, _ -> Response in
            beforeScrape()
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: registry.emitToBuffer())))
        }
        let bound = AsyncStream.makeStream(of: Int.self)
        var logger = Logger(label: "spool.metrics")
        logger.logLevel = .warning
        let application = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "spool"),
            onServerRunning: { channel in
                bound.continuation.yield(channel.localAddress?.port ?? port)
                bound.continuation.finish()
            },
            logger: logger)
        // No signal handling here: the command owns SIGINT and SIGTERM.
        let group = ServiceGroup(configuration: .init(services: [application], gracefulShutdownSignals: [], logger: logger))
        let server = Task {
            defer { bound.continuation.finish() }
            try await group.run()
        }
        var ports = bound.stream.makeAsyncIterator()
        guard let actual = await ports.next() else {
            try await server.value  // it ended before binding: its error
            throw ValidationError("the metrics endpoint on \(host):\(port) stopped before it started")
        }
        return MetricsEndpoint(registry: registry, port: actual, group: group, server: server)
    }

    /// Stops serving: a scrape in progress is answered first.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await server.value
    }
}

/// Counters that follow a running total read from elsewhere (the collector's own stats): each
/// update adds what the total gained since the last one.
final class CounterMirror: Sendable {
    private let counters: [String: CoreMetrics.Counter]
    private let last = Mutex<[String: Int]>([:])

    init(labels: [String]) {
        counters = Dictionary(uniqueKeysWithValues: labels.map { ($0, CoreMetrics.Counter(label: $0)) })
    }

    func update(_ totals: [String: Int]) {
        last.withLock { last in
            for (label, total) in totals {
                let delta = total - last[label, default: 0]
                if delta > 0 { counters[label]?.increment(by: Int64(delta)) }
                last[label] = max(total, last[label, default: 0])
            }
        }
    }
}
