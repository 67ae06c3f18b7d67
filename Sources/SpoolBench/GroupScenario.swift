import Foundation
import Spool
import SpoolCollector
import SpoolSync

/// Issue #29, an app and its extensions: four writer processes appending into one group
/// against one process appending the same records; the open of a writer log, `suspend()` and
/// `resume()`; and one `SyncGroup` draining four writer logs against one worker draining one.
///
/// The writer processes are this same executable started with ``BenchOptions/appendProbeArguments``:
/// each runs ``runAppendProbe(group:writer:count:)``.

/// The writers of the group rows.
private let groupWriters = ["app", "widget", "notification-service", "share"]

/// One writer process of the group rows: opens writer `writer` of `group`, waits for a line on
/// standard input (so every process starts appending at once), appends `count` generated events
/// (buffered, as an app does) and makes them durable, then exits. For a hidden option of
/// `compare` and `spool bench`; blocking.
package func runAppendProbe(group: String, writer: String, count: Int) throws {
    var generator = EventGenerator(seed: writer.utf8.reduce(0x5EED) { $0 &* 31 &+ UInt64($1) })
    let events = generator.events(min(count, 10_000))
    let log = try EventLog.open(group: group, writer: writer, logger: quietLogger)
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    _ = FileHandle.standardInput.availableData
    for index in 0..<count { try log.append(events[cycling: index]) }
    try log.syncBlocking()
    try log.close()
}

extension Context {
    func groupRows() async throws -> [Row] {
        guard let probe = options.appendProbeArguments else { return [] }
        let count = max(options.events, 4 * 1_000)
        var rows = [Row]()
        let best = try await alternate(
            [Step(key: "4 writer processes") { directory in
                try await blocking { try appendInProcesses(probe: probe, group: directory, writers: groupWriters, count: count) }
            }],
            [Step(key: "1 writer process") { directory in
                try await blocking { try appendInProcesses(probe: probe, group: directory, writers: ["app"], count: count) }
            }])
        if let four = best["4 writer processes"], let one = best["1 writer process"] {
            rows.append(Row(group: "group", scenario: "4 writer processes → one group, \(format(Double(count))) events in all (goal ≥ 80%)",
                            spool: Figure(four.rate, "events/s"), baseline: "1 process appending the same events",
                            baselineFigure: Figure(one.rate, "events/s"), percent: true, goal: .atLeast(0.8)))
        }
        rows += try await blocking { try suspensionRows(scratch: scratch, events: events, progress: progress) }
        let drains = try await alternate(
            [Step(key: "group drain") { directory in
                try await groupDrain(directory: directory, writers: groupWriters, count: count)
            }],
            [Step(key: "one log drain") { directory in
                try await groupDrain(directory: directory, writers: ["app"], count: count)
            }])
        if let group = drains["group drain"], let one = drains["one log drain"] {
            rows.append(Row(group: "group", scenario: "SyncGroup draining 4 writer logs to the collector (adaptive, 512 KiB batches)",
                            spool: Figure(group.rate, "events/s"), baseline: "one worker draining one log of the same events",
                            baselineFigure: Figure(one.rate, "events/s"), percent: true))
        }
        return rows
    }

    /// Fills `writers` logs of a group with `count` events in all (untimed), then times one
    /// `SyncGroup.flush()` of all of them to the reference collector on 127.0.0.1.
    private func groupDrain(directory: String, writers: [String], count: Int) async throws -> Run {
        let events = self.events
        try await blocking {
            for (index, writer) in writers.enumerated() {
                let log = try EventLog.open(group: directory, writer: writer, logger: quietLogger)
                for i in stride(from: index, to: count, by: writers.count) { try log.append(events[cycling: i]) }
                try log.syncBlocking()
                try log.close()
            }
        }
        var collectorConfiguration = CollectorConfiguration()
        collectorConfiguration.retainsRecords = false
        let collector = Collector(configuration: collectorConfiguration)
        let port = try await collector.start()
        var configuration = SyncConfiguration()
        configuration.maxBatchCount = 100_000
        configuration.maxBatchBytes = 512 * 1024
        configuration.concurrency = .adaptive(max: 16)
        let group = try SyncGroup(directory: directory, url: URL(string: "http://127.0.0.1:\(port)/batch")!,
                                  configuration: configuration, logger: quietLogger)
        let start = monotonicNanos()
        let report = await group.flush(retries: 1_000)
        let nanos = monotonicNanos() - start
        await group.stop()
        await collector.stop()
        if let failure = report.failure { throw failure.error }
        guard report.records == count else { throw BenchError("the group flush sent \(report.records) of \(count) events") }
        return Run(count: count, nanos: nanos)
    }
}

/// Starts one probe process per writer, each appending its share of `count` events, releases
/// them together, and times from the release to the last one's exit (its records durable).
private func appendInProcesses(probe: [String], group: String, writers: [String], count: Int) throws -> Run {
    var processes = [(Process, Pipe, Pipe)]()
    defer { for (process, _, _) in processes where process.isRunning { process.terminate() } }
    for (index, writer) in writers.enumerated() {
        let share = count / writers.count + (index < count % writers.count ? 1 : 0)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = probe + [group, "--probe-writer", writer, "--probe-count", "\(share)"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        processes.append((process, input, output))
    }
    for (_, _, output) in processes {
        var text = ""
        while !text.hasPrefix("ready\n") {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BenchError("an append probe ended before it was ready") }
            text += String(decoding: chunk, as: UTF8.self)
        }
    }
    let start = monotonicNanos()
    for (_, input, _) in processes { input.fileHandleForWriting.write(Data("go\n".utf8)) }
    for (process, _, _) in processes {
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("an append probe failed with status \(process.terminationStatus)") }
    }
    return Run(count: count, nanos: monotonicNanos() - start)
}

/// The open of a writer log in a group of four (each holding a few thousand records), and the
/// costs of `suspend()` (with one record pending: a write, an `fdatasync`, closing the files)
/// and `resume()`, as latencies.
private func suspensionRows(scratch: Scratch, events: EventSet, progress: @Sendable (String) -> Void) throws -> [Row] {
    let group = try scratch.fresh("suspend")
    defer { scratch.remove(group) }
    for writer in groupWriters {
        let log = try EventLog.open(group: group, writer: writer, logger: quietLogger)
        for i in 0..<5_000 { try log.append(events[cycling: i]) }
        try log.close()
    }
    var opens = [UInt64](), suspends = [UInt64](), resumes = [UInt64]()
    for _ in 0..<50 {
        let start = monotonicNanos()
        let log = try EventLog.open(group: group, writer: "widget", logger: quietLogger)
        opens.append(monotonicNanos() - start)
        try log.close()
    }
    let log = try EventLog.open(group: group, writer: "app", logger: quietLogger)
    for i in 0..<500 {
        try log.append(events[cycling: i])
        var start = monotonicNanos()
        try log.suspend()
        suspends.append(monotonicNanos() - start)
        start = monotonicNanos()
        try log.resume()
        resumes.append(monotonicNanos() - start)
    }
    try log.close()
    guard let open = Latencies(nanos: opens), let suspend = Latencies(nanos: suspends), let resume = Latencies(nanos: resumes) else { return [] }
    progress("  group: open p50 \(format(open.p50)) µs, suspend p50 \(format(suspend.p50)) µs, resume p50 \(format(resume.p50)) µs, p99 \(format(resume.p99)) µs")
    return [
        Row(group: "group", scenario: "resume(), p50 (goal ≤ 1 ms)", spool: Figure(resume.p50, "µs", latency: resume, note: "p99 \(format(resume.p99)) µs"),
            baseline: "the goal, 1 ms", baselineFigure: Figure(1_000, "µs"), goal: .atMost(1)),
        Row(group: "group", scenario: "suspend() with a record pending (write, fdatasync, close), p50", spool: Figure(suspend.p50, "µs", latency: suspend),
            baseline: "open of a writer log in a group of 4", baselineFigure: Figure(open.p50, "µs", latency: open)),
    ]
}
