import ArgumentParser
import Foundation
import Logging
import Spool
import SpoolBench
import SpoolCollector
import SpoolSync

/// `spool demo`: the whole job on one machine — producers append realistic analytics events,
/// the sync worker uploads them to the reference collector on 127.0.0.1, and the summary
/// proves nothing was lost.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Append realistic analytics events, sync them to a local collector, and show that none is lost.",
        discussion: """
            Creates a log (in a temporary directory, or --dir), starts the reference collector on \
            an ephemeral 127.0.0.1 port, appends events from several producers while the sync \
            worker uploads them with the default policies, shows live progress, and ends with a \
            summary. --faults makes the collector fail requests (503s, a few 429s with Retry-After, \
            resets, latency) so retries show; nothing is lost either way, and the default size \
            still finishes in a couple of minutes.
            """)

    @Option(help: "Events to append.")
    var events: Int = 200_000

    @Option(help: "Producer tasks appending concurrently.")
    var producers: Int = 4

    @Option(help: "Directory for the log and the collector's output: new, empty, or made by an earlier demo, whose log/ and collector.ndjson are replaced (default: a new temporary directory).")
    var dir: String?

    @Flag(help: "Inject faults in the collector: 20% 503, 0.5% 429 with Retry-After: 1, 2% connection resets, latency.")
    var faults = false

    @Option(help: "Seed of the generated events and of the injected faults.")
    var seed: UInt64 = 42

    func validate() throws {
        guard events >= 1 else { throw ValidationError("--events must be at least 1") }
        guard (1...64).contains(producers) else { throw ValidationError("--producers must be between 1 and 64") }
    }

    func run() async throws {
        let root = try await offload { try dir ?? makePrivateDirectory(prefix: "spool-demo") }
        let logDirectory = root + "/log"
        let collectorOutput = root + "/collector.ndjson"
        try await offload {
            try claimScratchDirectory(root, for: "demo")
            try? FileManager.default.removeItem(atPath: logDirectory)
            try? FileManager.default.removeItem(atPath: collectorOutput)
        }

        // The reference collector, with faults on demand.
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.outputPath = collectorOutput
        collectorConfiguration.retainsRecords = false
        collectorConfiguration.seed = seed
        if faults {
            // One request in five fails with a bare 503 (no Retry-After): each costs the
            // backoff's first step, since batches go through between failures. A 429 carries
            // `Retry-After: 1`, which every request honours: one in 200, or the default size
            // would wait out 200 of those seconds.
            collectorConfiguration.faults.failureRate = 0.2
            collectorConfiguration.faults.failureStatus = 503
            collectorConfiguration.faults.rateLimitRate = 0.005
            collectorConfiguration.faults.resetRate = 0.02
            collectorConfiguration.faults.latency = .milliseconds(2)
            collectorConfiguration.faults.latencyJitter = .milliseconds(5)
        }
        let collector = Collector(configuration: collectorConfiguration)
        let port = try await collector.start()

        // The log and its sync worker, with the default policies and `spool sync`'s window
        // (adaptive, up to 32 in flight, against the collector's 8 request slots): with
        // --faults, a failed batch is retried on its own while the rest flows.
        let log = try await offload { try EventLog.open(directory: logDirectory, logger: commandLogger()) }
        let consumer = try await offload { try log.consumer(named: "uploader") }
        var syncConfiguration = SyncConfiguration()
        syncConfiguration.concurrency = .adaptive(max: 32)
        let worker = try SyncWorker(consumer: consumer, url: URL(string: "http://127.0.0.1:\(port)/batch")!,
                                    configuration: syncConfiguration, logger: commandLogger("spool.sync"))
        await worker.start()

        let progress = Progress(total: events, interactive: isatty(1) == 1)
        try Output.write("spool demo: \(events) events from \(producers) producers → collector on 127.0.0.1:\(port)\(faults ? " (with injected faults)" : "")\nlog: \(logDirectory)\n")

        // Producers: plain threads, since `append` is a short blocking call.
        let started = ContinuousClock.now
        let appendTask = Task.detached { [events, producers, seed] in
            try await Self.produce(into: log, events: events, producers: producers, seed: seed)
        }
        let reporter = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(progress.interactive ? 200 : 1000))
                progress.show(appended: log.stats().appendedRecords, disk: log.stats().diskBytes,
                              uploaded: UInt64(collector.stats.received), lag: consumer.lag.records)
            }
        }
        try await appendTask.value
        let appendSeconds = (ContinuousClock.now - started).seconds
        try await log.sync()

        // Drain what the count policy has not sent yet (the interval would, within 15 s).
        var final = await worker.flush()
        var attempts = 0
        while consumer.lag.records > 0 && attempts < 600 {
            try await Task.sleep(for: .milliseconds(100))
            final = await worker.flush()
            attempts += 1
        }
        let totalSeconds = (ContinuousClock.now - started).seconds
        reporter.cancel()
        progress.show(appended: log.stats().appendedRecords, disk: log.stats().diskBytes,
                      uploaded: UInt64(collector.stats.received), lag: consumer.lag.records)
        progress.finish()
        await worker.stop()
        let syncStats = await worker.stats
        await collector.stop()
        let logStats = log.stats()
        let summary = try await offload { try log.summary() }
        try await offload { try log.close() }

        let received = collector.stats
        let lost = max(0, events - received.received)
        var rows: [(String, String)] = [
            ("events appended", "\(logStats.appendedRecords)"),
            ("append rate", String(format: "%.0f events/s (%d producers)", Double(events) / appendSeconds, producers)),
            ("bytes appended", "\(logStats.appendedBytes) (\(formatBytes(Int64(logStats.appendedBytes))))"),
            ("bytes on disk", "\(summary.diskBytes) (\(formatBytes(summary.diskBytes))), \(summary.segments.count) segments"),
            ("compression ratio", String(format: "%.2f (payload bytes per byte on disk: %.2f)", summary.compressionRatio, Double(logStats.appendedBytes) / Double(max(summary.diskBytes, 1)))),
            ("upload rate", String(format: "%.0f events/s end to end", Double(received.received) / totalSeconds)),
            ("batches uploaded", "\(syncStats.batches) (\(syncStats.records) records, \(formatBytes(Int64(syncStats.bytes))) of bodies)"),
            ("retries", "\(syncStats.retries)" + (faults ? " (injected: \(received.faults.failures) failures, \(received.faults.rateLimited) rate limits, \(received.faults.resets) resets)" : "")),
            ("received by collector", "\(received.received) unique"),
            ("duplicates", "\(received.duplicates) (dropped by event id)"),
            ("dead-lettered", "\(syncStats.deadLettered)"),
            ("lost", "\(lost)"),
        ]
        if let failure = final.failure { rows.append(("last flush error", "\(failure)")) }
        rows += [
            ("log", logDirectory),
            ("collector output", collectorOutput),
        ]
        let width = rows.map(\.0.count).max() ?? 0
        var table = "\n"
        for (name, value) in rows {
            table += name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + value + "\n"
        }
        table += "\ninspect: spool stat \(logDirectory) | spool verify \(logDirectory) | spool dump \(logDirectory) --limit 5\n"
        try Output.write(table)
        if lost > 0 { throw ExitCode(1) }
    }

    /// Appends `events` generated analytics events from `producers` threads.
    static func produce(into log: EventLog, events: Int, producers: Int, seed: UInt64) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for producer in 0..<producers {
                let share = events / producers + (producer < events % producers ? 1 : 0)
                group.addTask {
                    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                        Thread.detachNewThread {
                            var generator = EventGenerator(seed: seed &+ UInt64(producer) &* 0x9E37_79B9)
                            continuation.resume(with: Result {
                                for _ in 0..<share { try log.append(generator.nextEvent()) }
                            })
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

/// Live progress: a bar on a terminal, plain lines otherwise.
final class Progress: @unchecked Sendable {
    let total: Int
    let interactive: Bool
    private let lock = NSLock()
    private var lastLine = ""

    init(total: Int, interactive: Bool) {
        self.total = total
        self.interactive = interactive
    }

    func show(appended: UInt64, disk: Int64, uploaded: UInt64, lag: UInt64) {
        lock.withLock {
            let fraction = min(1, Double(uploaded) / Double(max(total, 1)))
            let text = "appended \(appended)  on disk \(formatBytes(disk))  uploaded \(uploaded)  lag \(lag)"
            if interactive {
                let width = 30
                let filled = Int(fraction * Double(width))
                let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: width - filled)
                try? Output.write("\r\u{1B}[2K[\(bar)] \(String(format: "%3.0f%%", fraction * 100))  \(text)")
            } else if text != lastLine {
                try? Output.write(text + "\n")
            }
            lastLine = text
        }
    }

    func finish() {
        if interactive { try? Output.write("\n") }
    }
}
