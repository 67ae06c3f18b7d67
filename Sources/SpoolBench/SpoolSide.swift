import Foundation
import Synchronization
import Logging
import Spool
import SpoolSync

/// The Spool half of every scenario: each function opens a new log in the directory it is
/// given, does one measured thing, and closes the log.
///
/// Thread-safety: a `Sendable` value; each call owns its log.
struct SpoolSide: Sendable {
    /// The events every scenario appends (cycled when a scenario needs more).
    let events: EventSet
    /// The configuration every log is opened with. The default is the library's.
    var configuration: Configuration

    init(events: EventSet, configuration: Configuration = .init()) {
        self.events = events
        self.configuration = configuration
    }

    func open(_ directory: String) throws -> EventLog {
        try EventLog.open(directory: directory, configuration: configuration, logger: quietLogger)
    }

    /// `producers` threads append with `durability` (`append(_:)` for `.buffered`,
    /// `appendBlocking` otherwise) until `budget` runs out, timing each call. The time
    /// includes `close()`, so every counted event reached the file.
    func append(_ durability: Durability, producers: Int, directory: String, budget: Budget) throws -> Run {
        let log = try open(directory)
        let events = self.events
        let ticket = Ticket(limit: budget.events)
        let start = monotonicNanos()
        let deadline = budget.deadline(from: start)
        let perThread = try onThreads(producers) { _ in
            var nanos = [UInt64]()
            nanos.reserveCapacity(budget.events / producers + 1)
            while let index = ticket.take() {
                let t0 = monotonicNanos()
                if durability == .buffered {
                    try log.append(events[cycling: index])
                } else {
                    try log.appendBlocking(events[cycling: index], durability: durability)
                }
                let t1 = monotonicNanos()
                nanos.append(t1 - t0)
                if t1 > deadline { break }
            }
            return nanos
        }
        try log.close()
        let all = perThread.flatMap { $0 }
        return Run(count: all.count, nanos: monotonicNanos() - start, latencies: Latencies(nanos: all))
    }

    /// `producers` concurrent tasks each await `append(_:durability:)`, one call at a time,
    /// until `budget` runs out: with `.synced`, this is group commit under load.
    func appendConcurrently(_ durability: Durability, producers: Int, directory: String, budget: Budget) async throws -> Run {
        let log = try await blocking { try open(directory) }
        let events = self.events
        let ticket = Ticket(limit: budget.events)
        let start = monotonicNanos()
        let deadline = budget.deadline(from: start)
        let all = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for _ in 0..<producers {
                group.addTask {
                    var nanos = [UInt64]()
                    while let index = ticket.take() {
                        let t0 = monotonicNanos()
                        try await log.append(events[cycling: index], durability: durability)
                        let t1 = monotonicNanos()
                        nanos.append(t1 - t0)
                        if t1 > deadline { break }
                    }
                    return nanos
                }
            }
            var all = [UInt64]()
            for try await nanos in group { all += nanos }
            return all
        }
        let stats = log.stats()
        try await blocking { try log.close() }
        var run = Run(count: all.count, nanos: monotonicNanos() - start, latencies: Latencies(nanos: all))
        if durability == .synced, stats.fsyncs > 0 {
            run.note = "\(format(Double(all.count) / Double(stats.fsyncs))) events/fsync"
        }
        return run
    }

    /// One task appending at `.written` while `synced` tasks append at `.synced` into the same
    /// log: the run is the written task's alone (its rate and latencies). A writer that waits
    /// for each group's `fdatasync` before it writes again holds every `written` append behind
    /// one; the two-stage commit writes it while the sync runs.
    func appendWrittenBesideSynced(synced: Int, directory: String, budget: Budget) async throws -> Run {
        let log = try await blocking { try open(directory) }
        let events = self.events
        let ticket = Ticket(limit: budget.events)
        let start = monotonicNanos()
        let deadline = budget.deadline(from: start)
        let run = try await withThrowingTaskGroup(of: Run?.self) { group in
            for _ in 0..<synced {
                group.addTask {
                    while let index = ticket.take() {
                        try await log.append(events[cycling: index], durability: .synced)
                        if monotonicNanos() > deadline { break }
                    }
                    return nil
                }
            }
            group.addTask {
                var nanos = [UInt64]()
                let began = monotonicNanos()
                while let index = ticket.take() {
                    let t0 = monotonicNanos()
                    try await log.append(events[cycling: index], durability: .written)
                    let t1 = monotonicNanos()
                    nanos.append(t1 - t0)
                    if t1 > deadline { break }
                }
                return Run(count: nanos.count, nanos: monotonicNanos() - began, latencies: Latencies(nanos: nanos))
            }
            var written: Run?
            for try await run in group where run != nil { written = run }
            return written!
        }
        try await blocking { try log.close() }
        return run
    }

    /// Synced appends arriving at `rate` a second whatever the log's pace, as requests reach
    /// a server (an open loop), each from a task of its own, for at most `budget`'s seconds
    /// (2 at most) and events. The run's latencies are each call's, from its start to its
    /// return; its rate is what completed over the whole time. In the closed loop every
    /// producer waits in the group being synced, so nothing arrives while it syncs; here
    /// arrivals land during each `fdatasync`, and the two-stage commit compresses and writes
    /// them meanwhile, so each waits for the sync in flight and its own, not also for a
    /// write behind them. If `maxInFlight` calls are waiting at once (the log fell behind the
    /// rate) the arrivals stop and the run's note says so.
    func appendSyncedOpenLoop(rate: Double, directory: String, budget: Budget, maxInFlight: Int = 20_000) async throws -> Run {
        let log = try await blocking { try open(directory) }
        let events = self.events
        let count = min(budget.events, Int(rate * min(budget.seconds, 2)))
        let tally = OpenLoopTally()
        let before = log.stats()
        let (nanos, saturated) = try await blocking {
            let interval = 1e9 / rate
            let start = monotonicNanos()
            var issued = 0
            var saturated = false
            arrivals: while issued < count {
                // Every arrival due by now, then a sleep of about one interval: the sleep
                // overshoots by tens of µs, so arrivals come in small bursts at the mean rate.
                let due = min(count, Int(Double(monotonicNanos() - start) / interval) + 1)
                while issued < due {
                    guard tally.inFlight.load(ordering: .relaxed) < maxInFlight else {
                        saturated = true
                        break arrivals
                    }
                    tally.start()
                    let event = events[cycling: issued]
                    Task {
                        let t0 = monotonicNanos()
                        do {
                            try await log.append(event, durability: .synced)
                            tally.finish(nanos: monotonicNanos() - t0)
                        } catch {
                            tally.finish(error: error)
                        }
                    }
                    issued += 1
                }
                usleep(UInt32(max(1, interval / 1000)))
            }
            tally.done.wait()
            return (monotonicNanos() - start, saturated)
        }
        let after = log.stats()
        let fsyncs = after.fsyncs - before.fsyncs
        let blocks = after.blocksWritten - before.blocksWritten
        let blocksDuringSync = after.blocksWrittenDuringSync - before.blocksWrittenDuringSync
        try await blocking { try log.close() }
        let (nanosPerCall, failure) = tally.results
        if let failure { throw failure }
        var run = Run(count: nanosPerCall.count, nanos: nanos, latencies: Latencies(nanos: nanosPerCall))
        var note = "offered \(format(rate))/s"
        if fsyncs > 0 { note += ", \(format(Double(nanosPerCall.count) / Double(fsyncs))) events/fsync" }
        if blocks > 0 { note += ", \(format(100 * Double(blocksDuringSync) / Double(blocks)))% of blocks written during a sync" }
        if saturated { note += ", fell behind: \(maxInFlight) calls waiting, arrivals stopped" }
        run.note = note
        return run
    }

    /// One pipelining producer: appends at `.buffered` and, every `window` events, starts
    /// an asynchronous wait for its latest seq to be `.written`, keeping up to `depth` such
    /// acknowledgements in flight instead of waiting for each event in turn. The time ends
    /// when the last event is acknowledged; latencies are from a window's last append to its
    /// acknowledgement.
    func appendPipelined(window: Int, depth: Int = 4, directory: String, budget: Budget) async throws -> Run {
        let log = try await blocking { try open(directory) }
        let events = self.events
        let start = monotonicNanos()
        let deadline = budget.deadline(from: start)
        let (count, acks) = try await withThrowingTaskGroup(of: UInt64.self) { group in
            var acks = [UInt64]()
            var inFlight = 0
            var count = 0
            var seq: UInt64 = 0
            while count < budget.events {
                seq = try log.append(events[cycling: count])
                count += 1
                if count % window == 0 {
                    if inFlight == depth, let ack = try await group.next() {
                        acks.append(ack)
                        inFlight -= 1
                    }
                    group.addTask { [seq] in
                        let t0 = monotonicNanos()
                        try await log.waitUntil(before: seq + 1, is: .written)
                        return monotonicNanos() - t0
                    }
                    inFlight += 1
                    if monotonicNanos() > deadline { break }
                }
            }
            try await log.waitUntil(before: seq + 1, is: .written)
            for try await ack in group { acks.append(ack) }
            return (count, acks)
        }
        let nanos = monotonicNanos() - start
        try await blocking { try log.close() }
        return Run(count: count, nanos: nanos, latencies: Latencies(nanos: acks))
    }

    /// Block sealing through the public path: one thread appends `budget.events` events,
    /// buffered and untimed one by one (no clock read per call), into 64 KiB blocks that the
    /// writer compresses, checksums and writes; the time includes `close()`. The run counts
    /// bytes of events, for MB/s.
    func seal(directory: String, budget: Budget) throws -> Run {
        let log = try open(directory)
        var bytes = 0
        let start = monotonicNanos()
        for index in 0..<budget.events {
            let event = events[cycling: index]
            try log.append(event)
            bytes += event.count
        }
        try log.close()
        return Run(count: bytes, nanos: monotonicNanos() - start)
    }

    /// Test-only: `SPOOL_BENCH_EXTRA_FSYNC=1` in the environment adds a write and an
    /// `fdatasync` of a scratch file per batch of the fast-commit drain, a deliberate slowdown
    /// of that one row, to show a regression found against a saved baseline. Never set it to
    /// measure.
    static let extraFsync = ProcessInfo.processInfo.environment["SPOOL_BENCH_EXTRA_FSYNC"] == "1"

    /// Stores `count` events (untimed), closes the log and measures its bytes on disk; then
    /// reopens it and drains it with one consumer — read `batch` records, encode the request
    /// body as the sync worker does (SpoolSync's `BatchEncoder`, JSON envelopes with event
    /// ids), commit (`mode`) — until empty, timed (the reopen included).
    func drain(batch: Int, mode: CommitMode = .durable, count: Int, directory: String) throws -> (run: Run, bytes: Int) {
        try fill(count: count, directory: directory)
        let bytes = bytesOnDisk(directory)
        let start = monotonicNanos()
        let log = try open(directory)
        let consumer = try log.consumer(named: "bench")
        let encoder = BatchEncoder(logID: log.id, encoding: .json)
        let slowdown = mode == .fast && Self.extraFsync ? try openFile(directory + "/extra-fsync", flags: O_CREAT | O_WRONLY) : nil
        defer { slowdown.map { _ = close($0) } }
        var drained = 0
        var bodyBytes = 0
        while true {
            let batch = try consumer.read(maxCount: batch, maxBytes: 16 << 20)
            if batch.isEmpty { break }
            bodyBytes += encoder.encode(batch.records, maxBytes: .max).body.count
            try consumer.commit(batch, mode: mode)
            if let slowdown {
                try writeAll(slowdown, [0], path: directory + "/extra-fsync")
                try check(fdatasync(slowdown), "fdatasync", directory + "/extra-fsync")
            }
            drained += batch.records.count
        }
        try log.close()
        precondition(drained == count && bodyBytes > 0, "the drain read \(drained) of \(count) events")
        return (Run(count: drained, nanos: monotonicNanos() - start), bytes)
    }

    /// Appends `count` events, buffered, to a new log in `directory`, syncs and closes it.
    ///
    /// The sync stands for time: a backlog drained at launch was written by an earlier run, and
    /// the kernel wrote its pages back within seconds of it. Without it, the reopen that the
    /// drain times would pay the fill's write-back (opening makes the recovered active segment
    /// durable before a consumer may read it).
    func fill(count: Int, directory: String) throws {
        let log = try open(directory)
        for index in 0..<count { try log.append(events[cycling: index]) }
        try log.syncBlocking()
        try log.close()
    }

    /// Appends `count` events (buffered) into a log whose records may take `maxBytes` at most
    /// (`Configuration.maxBytes`, dropping the oldest), syncs it, and returns how many it still
    /// holds: appended, less those the cap dropped. Every byte saved on disk is an event kept.
    /// Segments are an eighth of the cap (a cap must hold two; the cap drops whole segments,
    /// so smaller ones keep it fuller).
    ///
    /// With `cold`, sealed segments are rewritten by cold recompression
    /// (`Configuration.coldCompression` at its defaults): the events are appended in bursts of
    /// 10,000, each followed by the rewrite a background thread makes of what it sealed, as in
    /// an app whose log is idle between bursts (a tight loop of a million appends outruns any
    /// background thread, and measures that thread, not the bytes).
    func keptUnderCap(maxBytes: Int, count: Int, cold: Bool = false, directory: String) throws -> UInt64 {
        var capped = configuration
        capped.maxBytes = maxBytes
        capped.capPolicy = .dropOldest
        capped.segmentSize = max(64 * 1024, maxBytes / 8)
        if cold { capped.coldCompression = ColdCompression(inBackground: false) }
        let log = try EventLog.open(directory: directory, configuration: capped, logger: quietLogger)
        for index in 0..<count {
            try log.append(events[cycling: index])
            if cold && (index + 1) % 10_000 == 0 {
                try log.syncBlocking()
                try log.recompressSealedSegments()
            }
        }
        try log.syncBlocking()
        if cold { try log.recompressSealedSegments() }
        let stats = log.stats()
        try log.close()
        return stats.appendedRecords - stats.droppedRecords
    }

    /// Appends `count` events (buffered) into segments of 1 MiB, has cold recompression
    /// rewrite every sealed one (in 1 MiB blocks at `level`, by default the library's), closes
    /// the log and returns its bytes on disk, how many of them the active (never rewritten)
    /// segment holds, and how long the rewrite took.
    func coldBytes(count: Int, level: Int32 = ColdCompression().level, directory: String) throws -> (total: Int, active: Int, rewriteNanos: UInt64) {
        var cold = configuration
        cold.segmentSize = 1 << 20
        cold.coldCompression = ColdCompression(level: level, inBackground: false)
        let log = try EventLog.open(directory: directory, configuration: cold, logger: quietLogger)
        for index in 0..<count { try log.append(events[cycling: index]) }
        try log.syncBlocking()
        let start = monotonicNanos()
        try log.recompressSealedSegments()
        let rewriteNanos = monotonicNanos() - start
        try log.close()
        let active = try newestSegment(in: directory).size
        return (bytesOnDisk(directory), Int(active), rewriteNanos)
    }

    /// Fills a log with at least `bytes` of segments and an active (newest) segment of
    /// `activeBytes` to `activeBytes` + `slack`, then `repeats` times: tears its last block (cuts
    /// 3 bytes off the newest segment, as a crash mid-write would) and times `open`. Returns
    /// every open's time in nanoseconds, in order, the log's actual size, and the active
    /// segment's. Recovery reads the active segment whole, so that size, bounded by
    /// `Configuration.segmentSize`, sets the time: it is held the same across log sizes, or
    /// the figure would follow where the fill happened to stop within a segment.
    func openAfterTear(bytes target: Int, activeBytes: Int64, slack: Int64, repeats: Int, directory: String) throws -> (nanos: [UInt64], bytes: Int, activeBytes: Int64) {
        let log = try open(directory)
        var index = 0
        func append(_ count: Int) throws {
            for _ in 0..<count {
                try log.append(events[cycling: index])
                index += 1
            }
            try log.appendBlocking(events[cycling: index], durability: .written)
            index += 1
        }
        while bytesOnDisk(directory) < target - Int(activeBytes) { try append(20_000) }
        // Then on in small steps until the active segment is the size asked (rolling once if
        // it is already past it).
        let window = activeBytes..<(activeBytes + slack)
        // A step stores ~17 KB: this allows more than 4 segments' worth before giving up.
        let stepsAllowed = 4 * configuration.segmentSize / (8 << 10)
        var steps = 0
        while try !window.contains(newestSegment(in: directory).size) {
            steps += 1
            guard steps <= stepsAllowed else { throw BenchError("the active segment never reached \(activeBytes) bytes") }
            try append(500)
        }
        try log.close()
        let size = bytesOnDisk(directory)
        // Every file system's dirty pages, this fill's and earlier scenarios', are written back
        // first, so the timed opens never wait behind write-back that is not theirs.
        sync()
        var times = [UInt64]()
        var active: Int64 = 0
        for round in 0..<repeats {
            // (Each open cuts the torn block, so the next tear is in the block before it.)
            let torn = try tearNewestSegment(in: directory, by: 3)
            if round == 0 { active = torn }
            let start = monotonicNanos()
            let reopened = try open(directory)
            times.append(monotonicNanos() - start)
            try reopened.close()
        }
        return (times, size, active)
    }

    /// Peak resident memory above where it started, in bytes, in the two phases of holding a
    /// backlog: appending `count` events (buffered, no consumer) and closing; then reopening the
    /// log over them and reading one batch of 500. Neither may hold the backlog in memory:
    /// appending is bounded by `maxPendingBytes`, reopening by the active segment's last block.
    func backlogPeakMemory(count: Int, directory: String) throws -> (appending: Int, reopening: Int)? {
        guard let beforeFill = residentMemory() else { return nil }
        resetPeakMemory()
        try fill(count: count, directory: directory)
        guard let afterFill = residentMemory() else { return nil }
        resetPeakMemory()
        guard let beforeOpen = residentMemory() else { return nil }
        let log = try open(directory)
        _ = try log.consumer(named: "bench").read(maxCount: 500, maxBytes: 1 << 20)
        try log.close()
        guard let afterOpen = residentMemory() else { return nil }
        return (max(0, afterFill.peak - beforeFill.current), max(0, afterOpen.peak - beforeOpen.current))
    }
}

/// A logger that drops everything: the open-after-crash scenario tears logs on purpose, and
/// the recovery's info lines would interleave with the table.
let quietLogger = Logger(label: "spool-bench") { _ in SwiftLogNoOpLogHandler() }

/// What the open loop's tasks report: each call's latency, the first error, and how many
/// calls are in flight; `done` is entered per call and left as it returns.
private final class OpenLoopTally: Sendable {
    let inFlight = Atomic<Int>(0)
    let done = DispatchGroup()
    private let state = Mutex<(nanos: [UInt64], error: (any Error)?)>(([], nil))

    func start() {
        inFlight.add(1, ordering: .relaxed)
        done.enter()
    }

    func finish(nanos: UInt64) {
        state.withLock { $0.nanos.append(nanos) }
        end()
    }

    func finish(error: any Error) {
        state.withLock { $0.error = $0.error ?? error }
        end()
    }

    private func end() {
        inFlight.subtract(1, ordering: .relaxed)
        done.leave()
    }

    var results: (nanos: [UInt64], error: (any Error)?) { state.withLock { ($0.nanos, $0.error) } }
}
