import Foundation
import Spool

/// Follow latency (issue #19): from the call of `append(.written)` in this process to the
/// record being handed out by a ``LogFollower`` in another process (and, as the comparison,
/// by ``EventLog/follow(from:)`` in this one). Both clocks are the machine's monotonic clock,
/// which every process shares.
///
/// The other process is this same executable started with ``BenchOptions/followProbeArguments``
/// and the log's directory: it runs ``runFollowProbe(directory:)``.

/// The payload that ends a probe.
private let probeEnd = Array("spool-follow-probe-end".utf8)

/// The other side of the follow measurement: follows the log in `directory` from seq 0 and
/// prints `ready`, then `<seq> <monotonic nanos>` for every record as it is handed out, until
/// the record whose payload ends the probe. For a hidden option of `spool bench` and
/// `compare`; blocking.
package func runFollowProbe(directory: String) throws {
    let follower = try LogFollower(directory: directory, from: 0, logger: quietLogger)
    defer { follower.stop() }
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    var out = ""
    while true {
        let items = try follower.nextBatch()
        let now = monotonicNanos()
        out.removeAll(keepingCapacity: true)
        for case .record(let record) in items {
            if record.payload == probeEnd {
                FileHandle.standardOutput.write(Data(out.utf8))
                return
            }
            out += "\(record.seq) \(now)\n"
        }
        FileHandle.standardOutput.write(Data(out.utf8))
    }
}

/// Appends `count` events one at a time at `written`, about `spacing` apart (a follower waits
/// for each: the latency of waking up, not of reading a backlog), and returns each record's
/// latency to the follower. `handedOut` waits for the follower's times of seqs 0..<count.
private func timeFollow(events: EventSet, count: Int, spacing: UInt32, log: EventLog,
                        handedOut: () throws -> [UInt64: UInt64]) throws -> [UInt64] {
    var started = [UInt64](repeating: 0, count: count)
    for index in 0..<count {
        started[index] = monotonicNanos()
        _ = try log.appendBlocking(events[cycling: index], durability: .written)
        usleep(spacing)
    }
    _ = try log.appendBlocking(probeEnd, durability: .written)
    let times = try handedOut()
    return (0..<count).compactMap { index in times[UInt64(index)].map { $0 &- started[index] } }
}

extension Context {
    /// Two rows' worth: a follower in another process, against one in the writing process.
    func followRows() async throws -> [Row] {
        guard let arguments = options.followProbeArguments else { return [] }
        let events = self.events
        let count = options.followEvents
        let directory = try scratch.fresh("follow")
        let crossProcess = try await blocking { try followFromAnotherProcess(events: events, count: count, arguments: arguments, directory: directory) }
        scratch.remove(directory)
        let local = try scratch.fresh("follow-local")
        let inProcess = try await blocking { try followInProcess(events: events, count: count, directory: local) }
        scratch.remove(local)
        guard let cross = Latencies(nanos: crossProcess), let same = Latencies(nanos: inProcess) else { return [] }
        progress("  follow: another process p50 \(format(cross.p50)) µs, p99 \(format(cross.p99)) µs; "
            + "this process p50 \(format(same.p50)) µs, p99 \(format(same.p99)) µs (\(cross.samples) records)")
        return [
            Row(group: "follow", scenario: "append(.written) → another process's follower, p50 (goal ≤ 1 ms)",
                spool: Figure(cross.p50, "µs", latency: cross, note: "p99 goal ≤ 5 ms"),
                baseline: "follower in the writing process", baselineFigure: Figure(same.p50, "µs", latency: same)),
        ]
    }
}

/// The probe in a child process, this process appending.
private func followFromAnotherProcess(events: EventSet, count: Int, arguments: [String], directory: String) throws -> [UInt64] {
    let log = try EventLog.open(directory: directory, logger: quietLogger)
    defer { try? log.close() }
    try log.syncBlocking()  // the log exists on disk before the probe opens it
    let probe = Process()
    probe.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    probe.arguments = arguments + [directory]
    let output = Pipe()
    probe.standardOutput = output
    try probe.run()
    defer { if probe.isRunning { probe.terminate() }; probe.waitUntilExit() }
    let reader = output.fileHandleForReading
    var text = ""
    func readLine() -> Bool {
        let chunk = reader.availableData
        text += String(decoding: chunk, as: UTF8.self)
        return !chunk.isEmpty
    }
    while !text.hasPrefix("ready\n") { guard readLine() else { throw SpoolError(.io, "the follow probe ended before it was ready") } }
    text.removeFirst("ready\n".count)
    return try timeFollow(events: events, count: count, spacing: 500, log: log) {
        while readLine() {}  // to the end: the probe exits at the end record
        var times = [UInt64: UInt64]()
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let seq = UInt64(fields[0]), let nanos = UInt64(fields[1]) { times[seq] = nanos }
        }
        return times
    }
}

/// `EventLog.follow` on a thread of this process.
private func followInProcess(events: EventSet, count: Int, directory: String) throws -> [UInt64] {
    let log = try EventLog.open(directory: directory, logger: quietLogger)
    defer { try? log.close() }
    let follower = try log.follow(from: 0)
    let times = LockedTimes()
    let thread = Thread {
        while true {
            guard let items = try? follower.nextBatch(), !items.isEmpty else { return }
            let now = monotonicNanos()
            for case .record(let record) in items {
                if record.payload == probeEnd { times.finish(); return }
                times.set(record.seq, now)
            }
        }
    }
    thread.start()
    defer { follower.stop() }
    return try timeFollow(events: events, count: count, spacing: 500, log: log) { times.waitForEnd() }
}

/// The in-process follower's times, handed to the appending thread at the end.
private final class LockedTimes: @unchecked Sendable {
    private let condition = NSCondition()
    private var times = [UInt64: UInt64]()
    private var ended = false

    func set(_ seq: UInt64, _ nanos: UInt64) { condition.withLock { times[seq] = nanos } }
    func finish() { condition.withLock { ended = true; condition.broadcast() } }
    func waitForEnd() -> [UInt64: UInt64] {
        condition.withLock {
            let deadline = Date().addingTimeInterval(30)
            while !ended && condition.wait(until: deadline) {}
            return times
        }
    }
}
