import Foundation
import Spool
import Synchronization
import Testing

/// Readers beside a live writer, with real processes (issue #19): `spool stat`, `dump` and
/// `verify` in a loop against a log that `spool append` keeps writing and rolling (64 KiB
/// segments, a 256 KiB cap: retention deletes segments under them), the appender killed with
/// SIGKILL and restarted at random. Readers never fail,
/// never report the live tail as corruption, and never show a record other than the one
/// appended at its seq; the appender never fails to open or append because of them.
@Suite struct LiveReadTests {
    typealias Appender = AppenderChild

    /// `p<process>-<n>` of a dumped line, checked against the line format.
    static func identity(of payload: Substring) -> (process: Int, n: Int)? {
        // Over the UTF-8 bytes, not Characters: a debug build walks Characters slowly, and
        // this runs for every line of every dump.
        let parts = payload.utf8.split(separator: UInt8(ascii: "-"))
        func isHexDigit(_ byte: UInt8) -> Bool {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
        }
        guard parts.count == 3, parts[0].first == UInt8(ascii: "p"), let process = Int(Substring(parts[0].dropFirst())), let n = Int(Substring(parts[1])),
              parts[2].count == 40 + n % 200, parts[2].allSatisfy({ $0 == UInt8(ascii: "x") }) || parts[2].allSatisfy(isHexDigit) else { return nil }
        return (process, n)
    }

    @Test func readersBesideAnAppenderThatRollsAndIsKilledNeverFailAndAgree() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var random = SplitMix64(seed: UInt64(Date().timeIntervalSince1970))
        var processID = 0
        var appender = try Appender(directory: dir, id: processID)
        defer { _ = appender.kill() }
        // Wait for the log to exist before reading it.
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: dir + "/META") { usleep(10_000) }
        var seen: [UInt64: String] = [:]  // every seq's payload, as first printed
        for round in 0..<30 {
            let stat = try SpoolBinary.run(["stat", dir])
            #expect(stat.status == 0, "round \(round): stat: \(stat.stderr)")
            let verify = try SpoolBinary.run(["verify", dir])
            #expect(verify.status == 0, "round \(round): verify: \(verify.stdout) \(verify.stderr)")
            let dump = try SpoolBinary.run(["dump", dir])
            #expect(dump.status == 0, "round \(round): dump: \(dump.stderr)")
            #expect(!dump.stderr.contains("corrupt"), "round \(round): \(dump.stderr)")
            var previous: (seq: UInt64, process: Int, n: Int)?
            for line in lines(of: dump.stdout) {
                let fields = line.split(separator: "\t", maxSplits: 1)
                guard fields.count == 2, let seq = UInt64(fields[0]), let identity = Self.identity(of: fields[1]) else {
                    Issue.record("round \(round): a line that was never appended: \(line.prefix(80))")
                    break
                }
                if let previous {
                    #expect(seq == previous.seq + 1, "round \(round): seq \(seq) after \(previous.seq)")
                    // One appender's lines keep their order; a new appender starts after the old one's.
                    #expect(identity.process > previous.process || (identity.process == previous.process && identity.n > previous.n),
                            "round \(round): seq \(seq) holds \(fields[1].prefix(20)) after p\(previous.process)-\(previous.n)")
                }
                previous = (seq, identity.process, identity.n)
                let payload = String(fields[1])
                if let earlier = seen[seq] {
                    #expect(earlier == payload, "round \(round): seq \(seq) read as \(payload.prefix(20)), before as \(earlier.prefix(20))")
                } else {
                    seen[seq] = payload
                }
            }
            if random.next() % 6 == 0 {
                #expect(appender.kill() == SIGKILL, "the appender ended before it was killed")
                processID += 1
                appender = try Appender(directory: dir, id: processID)
            }
        }
        #expect(appender.process.isRunning, "the appender failed beside the readers")
        #expect(seen.count > 1_000)
        // The last appender (restarted after each kill) opened beside the readers and appends.
        usleep(300_000)
        let final = try LogSnapshot(directory: dir)
        defer { final.close() }
        let last = try #require(records(try final.readAll()).last)
        #expect(String(decoding: last.payload, as: UTF8.self).hasPrefix("p\(processID)-"), "the last appender, p\(processID), wrote nothing")
    }

    /// `spool dump --follow` in its own process beside `spool append` processes that roll 64 KiB
    /// segments and are SIGKILLed and restarted: it prints every record once, in seq order, the
    /// same bytes a final `dump` reads, with no notice (a killed writer's torn tail is not damage).
    @Test func dumpFollowPrintsEveryRecordOnceInOrderAcrossKillsAndRolls() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var appender = try Appender(directory: dir, id: 0, capped: false)
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: dir + "/META") { usleep(10_000) }
        let follow = Process()
        follow.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        follow.arguments = ["dump", dir, "--follow"]
        let output = Pipe(), errors = Pipe()
        follow.standardOutput = output
        follow.standardError = errors
        try follow.run()
        let printed = Mutex(Data())
        let reading = Thread { while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty { printed.withLock { $0.append(chunk) } } }
        reading.start()
        for id in 1...5 {
            usleep(400_000)
            #expect(appender.kill() == SIGKILL)
            appender = try Appender(directory: dir, id: id, capped: false)
        }
        usleep(400_000)
        #expect(appender.kill() == SIGKILL)
        let final = try SpoolBinary.run(["dump", dir])
        #expect(final.status == 0 && final.stderr.isEmpty, "\(final.stderr)")
        let expected = Data(final.stdout.utf8)
        // The follower catches up within moments; the bound only keeps a broken build from hanging.
        for _ in 0..<1_000 where printed.withLock({ $0.count }) < expected.count { usleep(10_000) }
        follow.terminate()
        follow.waitUntilExit()
        let got = printed.withLock { $0 }
        #expect(got == expected, "followed \(got.count) bytes, the log holds \(expected.count)")
        let lines = final.stdout.split(separator: "\n")
        #expect(lines.count > 1_000)
        #expect(lines.enumerated().allSatisfy { $0.element.hasPrefix("\($0.offset)\t") }, "seqs 0, 1, 2, ... with none skipped")
        let notices = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(notices.isEmpty, "the follower reported: \(notices)")
    }

    /// `spool dump --follow --consumer NAME --commit` beside a running appender: it prints the
    /// consumer's records as they come, in order from its offset, commits each batch, and never
    /// takes the writer's lock (the appender, started after it, opens and appends).
    @Test func dumpFollowCommitCommitsWhatItPrintsBesideAWriterThatStartsAfterIt() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try SpoolBinary.run(["append", dir], input: Data("first\n".utf8)).status == 0)
        #expect(try SpoolBinary.run(["commit", dir, "--consumer", "c", "--through", "0", "--create"]).status == 0)
        let follow = Process()
        follow.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        follow.arguments = ["dump", dir, "--follow", "--consumer", "c", "--commit", "--batch", "40", "--limit", "600"]
        let output = Pipe()
        follow.standardOutput = output
        follow.standardError = FileHandle.nullDevice
        try follow.run()
        let printed = Mutex(Data())
        Thread.detachNewThread { while case let chunk = output.fileHandleForReading.availableData, !chunk.isEmpty { printed.withLock { $0.append(chunk) } } }
        usleep(200_000)  // the follower waits for records before any writer runs
        let appender = try Appender(directory: dir, id: 7, capped: false)
        for _ in 0..<1_000 where follow.isRunning { usleep(10_000) }
        #expect(!follow.isRunning, "dump --follow --commit did not reach --limit 600")
        if follow.isRunning { follow.terminate() }
        follow.waitUntilExit()
        #expect(appender.process.isRunning, "the writer failed beside the committing follower")
        _ = appender.kill()
        #expect(follow.terminationStatus == 0)
        let lines = String(decoding: printed.withLock { $0 }, as: UTF8.self).split(separator: "\n")
        let records = lines.filter { !$0.hasPrefix("#") }
        #expect(records.count == 600)
        #expect(records.enumerated().allSatisfy { $0.element.hasPrefix("\($0.offset + 1)\tp7-\($0.offset)-") }, "seqs 1, 2, 3, ... holding p7-0, p7-1, ...")
        #expect(lines.last == "# committed through 600")
        let stat = try SpoolBinary.run(["stat", dir])
        #expect(stat.stdout.contains("c  offset 601"), "\(stat.stdout)")
    }

    /// A paused reader: a `spool dump` whose output nobody reads (it blocks once the pipe is
    /// full, holding its segments open) while a writer starts, appends, rolls 64 KiB segments
    /// and deletes old ones under a 256 KiB cap. The writer opens and writes beside it; read
    /// again, the dump ends normally, each record the one appended at its seq, in order, with
    /// deleted ranges reported as dropped, never as corruption.
    @Test func aPausedDumpNeitherBlocksNorIsBrokenByAWriterThatRollsAndDeletes() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let filler = try Appender(directory: dir, id: 0, capped: true, noisy: true)
        usleep(800_000)
        _ = filler.kill()
        let dump = Process()
        dump.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        dump.arguments = ["dump", dir]
        let output = Pipe(), errors = Pipe()
        dump.standardOutput = output
        dump.standardError = errors
        try dump.run()
        usleep(300_000)  // blocked on its full pipe by now
        #expect(dump.isRunning, "the dump ended before it could be paused")
        let writer = try Appender(directory: dir, id: 1, capped: true, noisy: true)
        usleep(1_500_000)
        #expect(writer.process.isRunning, "the writer could not open or append beside a paused reader")
        let stat = try SpoolBinary.run(["stat", dir])
        #expect(!stat.stdout.contains("00000000000000000000.seg"), "the cap deleted no segment under the paused reader: \(stat.stdout)")
        _ = writer.kill()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        dump.waitUntilExit()
        let notices = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(dump.terminationStatus == 0, "\(notices)")
        #expect(!notices.contains("corrupt") && !notices.contains("missing"), "\(notices)")
        var previous: UInt64?
        var linesRead = 0
        for line in lines(of: printed) {
            let fields = line.split(separator: "\t", maxSplits: 1)
            guard fields.count == 2, let seq = UInt64(fields[0]), Self.identity(of: fields[1]) != nil else {
                Issue.record("a line that was never appended: \(line.prefix(80))")
                break
            }
            if let previous { #expect(seq > previous) }
            previous = seq
            linesRead += 1
        }
        #expect(linesRead > 200)
    }

    func records(_ items: [ReadItem]) -> [Record] {
        items.compactMap { if case .record(let record) = $0 { record } else { nil } }
    }
}
