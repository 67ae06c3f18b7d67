import Foundation
import Spool
import SpoolCollector
import SpoolPostgres
import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

extension SpoolSide {
    /// Issue #28's fleet end to end: 4 device logs of `count / 4` events each (stored untimed)
    /// drained at once (one `SyncWorker` each, adaptive ≤ 16, batches of 50, the sync's default)
    /// through nginx (``Nginx``) to `collectors` reference collectors, each storing into a
    /// durable log of its own (`--log`), each log forwarded by a sidecar worker of its own (a
    /// `DetachedConsumer`, as `spool sync --sidecar`; 1,000 rows per transaction, adaptive
    /// ≤ 16) into one new PostgreSQL table at `url`. Timed from the devices' first request
    /// until the table holds every event (its `count(*)` polled every 50 ms).
    func fleetIntoPostgres(collectors: Int, url: String, count: Int, directory: String) async throws -> Run {
        let devices = 4
        let perDevice = count / devices
        let table = try Self.newTable(url: url)
        defer { _ = try? Self.psql(url: url, ["-c", "DROP TABLE \(table)"]) }
        let logs = try await deviceLogs(devices, perDevice: perDevice, directory: directory)
        var started: [Collector] = []
        var forwarders: [(worker: SyncWorker<ContinuousClock>, consumer: DetachedConsumer)] = []
        var nginx: Nginx?
        func stopAll() async {
            for forwarder in forwarders {
                await forwarder.worker.stop()
                forwarder.consumer.close()
            }
            for collector in started { await collector.stop() }
            nginx?.stop()
            _ = try? await blocking { for log in logs { try log.close() } }
        }
        do {
            var ports: [Int] = []
            for index in 0..<collectors {
                var configuration = CollectorConfiguration()
                configuration.retainsRecords = false
                configuration.maxConcurrentRequests = 64
                configuration.logDirectory = directory + "/collector\(index)"
                let collector = Collector(configuration: configuration)
                ports.append(try await collector.start())
                started.append(collector)
                var forwarding = SyncConfiguration()
                forwarding.maxBatchCount = 1000
                forwarding.maxBatchBytes = 4 << 20
                forwarding.concurrency = .adaptive(max: 16)
                forwarding.flushCount = 1
                forwarding.minimumFlushInterval = .milliseconds(50)
                forwarding.flushInterval = .milliseconds(50)
                let consumer = try await blocking { try DetachedConsumer(directory: directory + "/collector\(index)", name: "forward", creating: true) }
                let sink = try PostgresSink(configuration: try PostgresSink.Configuration(url: url, table: table), logID: consumer.logID,
                                            origins: true)
                let worker = try SyncWorker(consumer: consumer, sink: sink, configuration: forwarding, logger: quietLogger)
                forwarders.append((worker, consumer))
                await worker.start()
            }
            let upstreams = ports
            nginx = try await blocking { try Nginx(directory: directory, upstreams: upstreams) }
            let (start, _, reports, _) = try await flushAtOnce(logs, to: URL(string: nginx!.url)!, batch: 50)
            if let failure = reports.compactMap(\.failure).first { throw failure }
            let total = perDevice * devices
            var landed = 0
            let deadline = monotonicNanos() + 300_000_000_000
            while landed < total {
                guard monotonicNanos() < deadline else { throw BenchError("PostgreSQL holds \(landed) of \(total) events after 5 minutes") }
                try await Task.sleep(for: .milliseconds(50))
                landed = Int(try await blocking { try Self.psql(url: url, ["-At", "-c", "SELECT count(*) FROM \(table)"]) }) ?? 0
            }
            let nanos = monotonicNanos() - start
            await stopAll()
            guard landed == total else { throw BenchError("PostgreSQL holds \(landed) rows for \(total) events") }
            return Run(count: total, nanos: nanos)
        } catch {
            await stopAll()
            throw error
        }
    }
}
