import Foundation
import Testing
@testable import Spool

/// Issue #29: an app and its extensions share one directory, each writer with a log of its own
/// (`LogGroup`), and a writer lets go of every lock and file while suspended.
@Suite struct LogGroupTests {
    /// The descriptors of this process that point into `directory` (from `/proc/self/fd`).
    func openFiles(under directory: String) -> [String] {
        let root = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd) else { return nil }
            return target.hasPrefix(root + "/") || target == root ? target : nil
        }
    }

    /// Whether another process (util-linux `flock -n`) can take `path`'s exclusive lock now.
    func anotherProcessCanLock(_ path: String) throws -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        process.arguments = ["-n", "-x", path, "-c", "true"]
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test func eachWriterHasALogOfItsOwnAndTheGroupListsThem() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let group = dir.path + "/shared"
        let app = try EventLog.open(group: group, writer: "app")
        let widget = try EventLog.open(group: group, writer: "widget")
        for i in 0..<100 { try app.append("app \(i)") }
        for i in 0..<30 { try widget.append("widget \(i)") }
        try app.syncBlocking()
        try widget.syncBlocking()
        #expect(app.directory == group + "/writers/app")
        #expect(app.id != widget.id, "each writer log has its own id, so event ids stay unique")
        #expect(try LogGroup.writers(in: group) == ["app", "widget"])
        #expect(LogGroup.isGroup(group))
        for path in [group, group + "/writers", group + "/writers/app"] {
            let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
            #expect(mode == 0o700, "\(path) is \(String(mode, radix: 8))")
        }
        // One process per writer name, as for any log.
        #expect(throws: SpoolError.self) { _ = try EventLog.open(group: group, writer: "app") }
        for bad in ["", "../app", ".hidden", "a/b", String(repeating: "x", count: 65)] {
            let error = #expect(throws: SpoolError.self) { _ = try EventLog.open(group: group, writer: bad) }
            #expect(error?.code == .invalidArgument)
        }
        try app.close()
        try widget.close()
        let snapshot = try LogSnapshot(directory: group + "/writers/widget")
        defer { snapshot.close() }
        #expect(snapshot.endSeq == 30)
    }

    @Test func suspendKeepsEveryAppendAndHoldsNoLockAndNoFileUntilResume() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(group: dir.path, writer: "app", configuration: smallConfiguration())
        let consumer = try log.consumer(named: "local")
        for i in 0..<2_000 { try log.append(payload(i)) }
        _ = try consumer.read(maxCount: 10)
        #expect(!openFiles(under: log.directory).isEmpty, "an open log holds its files (the check can see them)")
        #expect(try !anotherProcessCanLock(log.directory + "/LOCK"))

        try log.suspend()
        #expect(log.isSuspended)
        #expect(log.syncedEnd == 2_000, "suspend makes every appended record durable first")
        #expect(openFiles(under: log.directory) == [], "a suspended log holds no file")
        #expect(try anotherProcessCanLock(log.directory + "/LOCK"), "a suspended log holds no lock")
        #expect(try anotherProcessCanLock(log.directory + "/consumers/local.lock"), "its consumers' locks are released too")
        let refused = #expect(throws: SpoolError.self) { try log.append("while suspended") }
        #expect(refused?.code == .suspended)
        #expect(throws: SpoolError.self) { _ = try consumer.read(maxCount: 10) }
        // What it appended is on disk for a reader (another process's sync worker) meanwhile.
        let detached = try DetachedConsumer(directory: log.directory, name: "sync", creating: true)
        #expect(try detached.read(maxCount: 5_000).records.count == 2_000)
        detached.close()
        try log.suspend()  // a second suspend changes nothing

        try log.resume()
        #expect(!log.isSuspended)
        #expect(try !anotherProcessCanLock(log.directory + "/LOCK"))
        #expect(try log.append(payload(2_000)) == 2_000, "seqs go on where they stopped")
        let again = try log.consumer(named: "local")
        #expect(try again.read(maxCount: 5).records.first?.seq == 0)
        try log.close()
        let snapshot = try LogSnapshot(directory: log.directory)
        defer { snapshot.close() }
        let items = try snapshot.reader(from: nil).readToEnd()
        #expect(records(items).map(\.seq) == Array(0...2_000))
        #expect(records(items).map(\.payload) == (0...2_000).map { payload($0) })
    }

    @Test func resumeRefusesALogAnotherWriterChangedMeanwhile() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(group: dir.path, writer: "app")
        for i in 0..<10 { try log.append("first \(i)") }
        try log.suspend()
        // While it is suspended another process (here, another EventLog) opens the same writer
        // log and appends: the suspended one's idea of the tail is stale.
        let intruder = try EventLog.open(directory: log.directory)
        for i in 0..<5 { try intruder.append("intruder \(i)") }
        let heldError = #expect(throws: SpoolError.self) { try log.resume() }
        #expect(heldError?.code == .locked, "the other writer holds the lock now")
        try intruder.close()
        let changedError = #expect(throws: SpoolError.self) { try log.resume() }
        #expect(changedError?.code == .locked)
        #expect(changedError?.message.contains("changed the log while this one was suspended") == true)
        #expect(log.isSuspended, "a refused resume leaves it suspended")
        try log.close()
        // Opening again recovers everything both wrote, seqs unique.
        let reopened = try EventLog.open(group: dir.path, writer: "app")
        #expect(reopened.nextSeq == 15)
        try reopened.close()
    }

    @Test func closeOfASuspendedLogIsClean() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(group: dir.path, writer: "ext")
        try log.append("one")
        try log.suspend()
        try log.close()
        #expect(throws: SpoolError.self) { try log.resume() }
        let reopened = try EventLog.open(group: dir.path, writer: "ext")
        #expect(reopened.nextSeq == 1)
        try reopened.close()
    }

    @Test func appendsFromManyThreadsRaceSuspendAndResumeWithoutLosingAnAcknowledgedRecord() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        let log = try EventLog.open(group: dir.path, writer: "app", configuration: smallConfiguration())
        let accepted = ResultBox<[UInt64]>()
        accepted.set(.success([]))
        let threads = 4
        let done = DispatchGroup()
        for t in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                var mine = [UInt64]()
                for i in 0..<3_000 {
                    if let seq = try? log.append(payload(t * 10_000 + i)) { mine.append(seq) }
                }
                let all = (try? accepted.get()?.get()) ?? []
                accepted.set(.success(all + mine))
                done.leave()
            }
        }
        // Suspend and resume while they append: appends in between are refused, never lost.
        var cycles = 0
        while done.wait(timeout: .now()) == .timedOut {
            try log.suspend()
            try log.resume()
            cycles += 1
        }
        #expect(cycles > 0)
        try log.close()
        let acknowledged = Set(try #require(try accepted.get()?.get()))
        let snapshot = try LogSnapshot(directory: log.directory)
        defer { snapshot.close() }
        let stored = records(try snapshot.reader(from: nil).readToEnd()).map(\.seq)
        #expect(Set(stored).isSuperset(of: acknowledged), "an acknowledged append was lost across suspend/resume")
        #expect(stored == Array(0..<UInt64(stored.count)), "seqs are dense and never reused")
    }
}

/// `Configuration.suspendsWhenIdle`: the log holds its lock and files only while calls are in
/// progress (and while the writer writes what they left).
@Suite struct IdleSuspensionTests {
    let group = LogGroupTests()

    /// Polls (10 ms apart, at most 10 s) until `condition` holds.
    func eventually(_ condition: () throws -> Bool) throws -> Bool {
        for _ in 0..<1_000 {
            if try condition() { return true }
            usleep(10_000)
        }
        return try condition()
    }

    /// The idle suspension checks that nothing is pending under the same lock as it starts:
    /// an append that came after the writer found the log idle keeps it open (before, the
    /// check and the start were two steps, and an append between them was flushed and the
    /// lock let go at once, while the caller expected the log to hold it).
    @Test func anIdleSuspensionThatFindsARecordPendingKeepsTheLogOpen() throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.linger = .seconds(30)
        let log = try EventLog.open(directory: dir.path, configuration: configuration)
        let lock = dir.path + "/LOCK"
        let queued = log.lock.withLock { log.state.queueIdleSuspension() }  // the writer found it idle
        #expect(queued)
        _ = try log.append("pending for the linger")               // then an append came
        try log.suspend(onlyIfIdle: true)                          // the queued suspension runs
        #expect(!log.isSuspended, "a record is pending: the log is not idle")
        #expect(try !group.anotherProcessCanLock(lock))
        #expect(log.syncedEnd == 0, "nothing was flushed for a suspension that did not happen")
        try log.suspend(onlyIfIdle: false)
        #expect(log.isSuspended && log.syncedEnd == 1)
        try log.close()
    }

    @Test func anIdleLogLetsGoOfItsLockAndEveryAppendTakesItBack() async throws {
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.suspendsWhenIdle = true
        configuration.linger = .seconds(5)
        let log = try EventLog.open(group: dir.path, writer: "widget", configuration: configuration)
        let lock = log.directory + "/LOCK"
        #expect(try eventually { log.isSuspended }, "a log opened idle suspends itself")
        #expect(try eventually { try group.anotherProcessCanLock(lock) })
        #expect(group.openFiles(under: log.directory) == [])

        var acknowledged = [UInt64]()
        for round in 0..<5 {
            // Buffered, blocking and async appends each take the log back.
            acknowledged.append(try log.append("buffered \(round)"))
            // Its record waits out the 5 s linger in the pending block: not idle, so the log
            // holds its lock again (the append took it back before taking the record).
            #expect(!log.isSuspended)
            #expect(try !group.anotherProcessCanLock(lock), "the log took its lock back before appending")
            acknowledged.append(try log.appendBlocking(Array("written \(round)".utf8), durability: .written))
            acknowledged.append(try await log.append(Array("synced \(round)".utf8), durability: .synced))
            #expect(try eventually { log.isSuspended }, "round \(round): idle again, it suspends itself")
            #expect(try group.anotherProcessCanLock(lock))
            #expect(group.openFiles(under: log.directory) == [], "round \(round): an idle log holds no file")
            #expect(log.syncedEnd == log.nextSeq, "what it let go of is durable")
        }
        #expect(acknowledged == Array(0..<15))
        try log.close()
        let snapshot = try LogSnapshot(directory: log.directory)
        defer { snapshot.close() }
        #expect(records(try snapshot.reader(from: nil).readToEnd()).map { String(decoding: $0.payload, as: UTF8.self) }
                == (0..<5).flatMap { ["buffered \($0)", "written \($0)", "synced \($0)"] })
    }

    @Test func anotherWriterMayNotTakeAnIdleLogsNameWhileItIsOpen() throws {
        // The lock is free while idle, but the name is not: another open of the same writer
        // log in that spell makes the first one's resume refuse (the tail it knows is stale),
        // never write over what the other wrote.
        let dir = TemporaryDirectory()
        defer { dir.cleanup() }
        var configuration = Configuration()
        configuration.suspendsWhenIdle = true
        let log = try EventLog.open(group: dir.path, writer: "widget", configuration: configuration)
        try log.append("first")
        #expect(try eventually { log.isSuspended })
        let other = try EventLog.open(group: dir.path, writer: "widget")
        try other.append("other")
        try other.close()
        let refused = #expect(throws: SpoolError.self) { try log.append("late") }
        #expect(refused?.code == .locked)
        try log.close()
        let snapshot = try LogSnapshot(directory: log.directory)
        defer { snapshot.close() }
        #expect(records(try snapshot.reader(from: nil).readToEnd()).map(\.seq) == [0, 1])
    }
}
