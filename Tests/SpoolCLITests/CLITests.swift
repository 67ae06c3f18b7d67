import Foundation
import Spool
import Testing

@Suite struct CLITests {
    @Test func appendDumpVerifyStatRoundTrip() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let lines = (0..<1000).map { "{\"event\":\"click\",\"n\":\($0)}" }
        let input = Data((lines.joined(separator: "\n") + "\n\u{1}binary\n").utf8)
        let append = try SpoolBinary.run(["append", dir, "--ack", "--durability", "synced"], input: input)
        #expect(append.status == 0, "\(append.stderr)")
        #expect(append.stdout.split(separator: "\n").map(String.init) == (0...1000).map { "\($0)" })

        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.status == 0)
        let dumped = dump.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(dumped.count == 1001)
        #expect(dumped.first == "0\t{\"event\":\"click\",\"n\":0}")
        // A record with a control character prints as base64: it must not reach the terminal.
        #expect(dumped.last.map(String.init) == "1000\tbase64:" + Data("\u{1}binary".utf8).base64EncodedString())

        let from = try SpoolBinary.run(["dump", dir, "--from", "998"])
        #expect(from.stdout.split(separator: "\n").map { $0.split(separator: "\t")[0] } == ["998", "999", "1000"])

        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 0)
        #expect(verify.stdout.contains("records    1001"))
        #expect(verify.stdout.contains("ok: no corruption"))

        let commit = try SpoolBinary.run(["commit", dir, "--consumer", "uploader", "--through", "499", "--create"])
        #expect(commit.status == 0, "\(commit.stderr)")
        let consumerDump = try SpoolBinary.run(["dump", dir, "--consumer", "uploader", "--limit", "1"])
        #expect(consumerDump.stdout.hasPrefix("500\t"))

        let stat = try SpoolBinary.run(["stat", dir])
        #expect(stat.status == 0)
        #expect(stat.stdout.contains("uploader  offset 500  lag 501 records"))
    }

    /// Mistakes are refused with a usage error naming them, and change nothing: a mistyped
    /// directory is not made into a log, a mistyped consumer is not created, a full standard
    /// output does not commit what it never printed, a demo does not delete files it did not
    /// make, and an endless line is refused before it takes memory without bound.
    /// `verify` exits 2 ("could not check") for a directory that holds no log or an unreadable
    /// key file, and no command exits 0 when standard output refused what it printed (issue #21, item 10).
    @Test func exitCodesSayWhetherTheCheckRanAndWhetherItsOutputGotOut() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try SpoolBinary.run(["append", dir], input: Data("a\nb\n".utf8)).status == 0)
        #expect(try SpoolBinary.run(["verify", dir + "-nonexistent"]).status == 2)
        #expect(try SpoolBinary.run(["verify", dir, "--key-file", dir + "-no-such-key-file"]).status == 2)
        for command in [["verify", dir], ["stat", dir], ["dump", dir]] {
            let result = try SpoolBinary.run(command, standardOutput: "/dev/full")
            #expect(result.status != 0 && result.stderr.contains("standard output"), "\(command): \(result.status) \(result.stderr)")
        }
    }

    @Test func mistakesAreRefusedAndChangeNothing() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let missing = dir + "/no-such-log"
        let verify = try SpoolBinary.run(["verify", missing])
        #expect(verify.status == 2)  // "could not check"
        #expect(verify.stderr.contains("is not a Spool log"), "\(verify.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing))

        let log = dir + "/log"
        let input = Data((0..<10).map { "line \($0)" }.joined(separator: "\n").utf8 + [0x0A])
        #expect(try SpoolBinary.run(["append", log, "--ack"], input: input).status == 0)
        let typo = try SpoolBinary.run(["commit", log, "--consumer", "uplaoder", "--through", "3"])
        #expect(typo.status == 64)
        #expect(typo.stderr.contains("no consumer named uplaoder (it has none)"), "\(typo.stderr)")
        #expect(!FileManager.default.fileExists(atPath: log + "/consumers/uplaoder.offset"))
        // --create with a seq never appended: refused, and no consumer is left behind.
        let past = try SpoolBinary.run(["commit", log, "--consumer", "late", "--through", "999", "--create"])
        #expect(past.status == 1)
        #expect(past.stderr.contains("the last appended record is 9"), "\(past.stderr)")
        #expect(!FileManager.default.fileExists(atPath: log + "/consumers/late.offset"))
        #expect(try SpoolBinary.run(["dump", log, "--limit", "0"]).status == 64)

        #expect(try SpoolBinary.run(["commit", log, "--consumer", "export", "--through", "0", "--create"]).status == 0)
        let full = try SpoolBinary.run(["dump", log, "--consumer", "export", "--commit"], standardOutput: "/dev/full")
        #expect(full.status != 0)
        #expect(full.stderr.contains("writing standard output failed"), "\(full.stderr)")
        #expect(try SpoolBinary.run(["stat", log]).stdout.contains("export  offset 1 "))

        let foreign = dir + "/project"
        try FileManager.default.createDirectory(atPath: foreign + "/log", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: foreign + "/log/keep.txt", contents: Data("mine".utf8))
        let demo = try SpoolBinary.run(["demo", "--dir", foreign, "--events", "10"])
        #expect(demo.status == 64)
        #expect(FileManager.default.fileExists(atPath: foreign + "/log/keep.txt"))
        let file = foreign + "/log/keep.txt"
        let notDirectory = try SpoolBinary.run(["demo", "--dir", file, "--events", "10"])
        #expect(notDirectory.status == 64)
        #expect(notDirectory.stderr.contains("is not a directory"), "\(notDirectory.stderr)")

        let endless = Data(repeating: UInt8(ascii: "a"), count: 3 << 20)
        let long = try SpoolBinary.run(["append", log], input: endless)
        #expect(long.status != 0)
        #expect(long.stderr.contains("a line of input is longer than Configuration.maxRecordSize"), "\(long.stderr)")
    }

    @Test func dumpNeverPrintsAControlCharacterFromAPayload() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let escape = "\u{1B}]0;owned\u{07}\u{1B}[2Jtitle"
        let lines = ["plain\twith a tab", escape, "c1 \u{9B}31m", "base64:looks encoded", "line\u{2028}separator", "paragraph\u{2029}separator"]
        _ = try SpoolBinary.run(["append", dir], input: Data((lines.joined(separator: "\n") + "\n").utf8))
        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.status == 0)
        let printed = dump.stdout.split(separator: "\n").map { $0.split(separator: "\t", maxSplits: 1).last.map(String.init) ?? "" }
        #expect(printed.count == 6)
        #expect(printed.first == "plain\twith a tab")
        #expect(printed.dropFirst().allSatisfy { $0.hasPrefix("base64:") }, "\(printed)")
        #expect(!dump.stdout.unicodeScalars.contains { [0x1B, 0x07, 0x9B, 0x2028, 0x2029].contains($0.value) })
        let decoded = printed.dropFirst().map { Data(base64Encoded: String($0.dropFirst("base64:".count))).map { String(decoding: $0, as: UTF8.self) } }
        #expect(decoded == Array(lines.dropFirst()))
    }

    @Test func verifyPrintsAForeignFileNameWithoutItsControlCharacters() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try SpoolBinary.run(["append", dir], input: Data("one\n".utf8))
        let name = "notes\u{1B}[2J\u{9B}0m.txt"
        #expect(FileManager.default.createFile(atPath: dir + "/" + name, contents: Data()))
        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 0)
        #expect(verify.stdout.contains(#"ignored    "notes\u{1B}[2J"#), "\(verify.stdout)")
        #expect(!verify.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B })
    }

    @Test func verifyFailsOnCorruptionAndNamesTheRange() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let input = Data((0..<50).map { "line \($0)" }.joined(separator: "\n").utf8 + [0x0A])
        // Two separately acknowledged appends make two blocks.
        _ = try SpoolBinary.run(["append", dir, "--ack"], input: input)
        _ = try SpoolBinary.run(["append", dir, "--ack"], input: input)
        let segment = dir + "/00000000000000000000.seg"
        var bytes = [UInt8](FileManager.default.contents(atPath: segment)!)
        bytes[64 + 45] ^= 0xFF  // inside the first block's payload
        _ = FileManager.default.createFile(atPath: segment, contents: Data(bytes))
        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 1)  // corrupt (2 would be: could not check)
        #expect(verify.stdout.contains("CORRUPT    corrupt 0..<50 (50 records)"), "\(verify.stdout)")
        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.stdout.split(separator: "\n").count == 50, "the second block is still read")
        #expect(dump.stderr.contains("corrupt 0..<50"))
        // A torn tail: dump, verify and stat read a snapshot, which reports it and changes
        // nothing; a writing open (append) cuts it, and says so.
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: segment))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("SPBK torn".utf8))
        try handle.close()
        let tornBytes = FileManager.default.contents(atPath: segment)
        let torn = try SpoolBinary.run(["dump", dir])
        #expect(torn.stdout.split(separator: "\n").count == 50)
        #expect(torn.stderr.contains("# recovery found 9 bytes at offset"), "\(torn.stderr)")
        let verifyTorn = try SpoolBinary.run(["verify", dir])
        #expect(verifyTorn.stdout.contains("recovery   found 9 bytes at offset"), "\(verifyTorn.stdout)")
        #expect(try SpoolBinary.run(["stat", dir]).stderr.contains("# recovery found 9 bytes"))
        #expect(FileManager.default.contents(atPath: segment) == tornBytes, "reading changed the segment")
        let append = try SpoolBinary.run(["append", dir], input: Data("after\n".utf8))
        #expect(append.status == 0)
        #expect(append.stderr.contains("# recovery cut 9 bytes at offset"), "\(append.stderr)")
        #expect(FileManager.default.contents(atPath: segment) != tornBytes)
    }

    /// A new consumer starts at the oldest stored record: `commit --create` below it is refused
    /// before the consumer is made, so none is left behind holding retention back.
    @Test func commitCreateBelowTheOldestRecordLeavesNoConsumer() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var configuration = Configuration()
        configuration.segmentSize = 64 * 1024
        configuration.blockSize = 4096
        let log = try EventLog.open(directory: dir, configuration: configuration)
        let reader = try log.consumer(named: "c")
        var filler = SystemRandomNumberGenerator()
        for _ in 0..<300 { try log.append((0..<900).map { _ in UInt8.random(in: 0x61...0x7A, using: &filler) }) }
        try log.syncBlocking()
        try reader.commit(upTo: log.nextSeq)  // retention deletes the sealed segments
        let oldest = log.firstSeq
        try log.close()
        #expect(oldest > 1)
        let refused = try SpoolBinary.run(["commit", dir, "--consumer", "x", "--through", "0", "--create"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("starts at the oldest stored record, \(oldest)"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/consumers/x.offset"))
    }

    /// Damage that stops even the opening is corruption found (1), not a failure to check (2).
    @Test func verifyExits1WhenDamageStopsTheOpen() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try SpoolBinary.run(["append", dir, "--ack"], input: Data("one\ntwo\n".utf8)).status == 0)
        for name in ["META", "00000000000000000000.seg"] {
            var bytes = [UInt8](FileManager.default.contents(atPath: dir + "/" + name)!)
            bytes[20] ^= 0xFF  // the log id, inside each one's checksum
            _ = FileManager.default.createFile(atPath: dir + "/" + name, contents: Data(bytes))
        }
        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 1)
        #expect(verify.stderr.contains("corrupt"), "\(verify.stderr)")
    }

    /// A second writer is refused (`append` while `append` runs); readers are not: `stat` and
    /// `verify` read the live log beside the writer (issue #19), and the writer goes on.
    @Test func aSecondWriterGetsLockedAndReadersReadBesideTheWriter() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        holder.arguments = ["append", dir, "--ack"]
        let input = Pipe()
        let output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try holder.run()
        input.fileHandleForWriting.write(Data("first\n".utf8))
        // The holder's acknowledgement proves it has the log open (and its lock).
        #expect(nextLine(of: output) == "0\n")
        let second = try SpoolBinary.run(["append", dir], input: Data("second\n".utf8))
        #expect(second.status != 0)
        #expect(second.stderr.contains("locked"), "\(second.stderr)")
        let stat = try SpoolBinary.run(["stat", dir])
        #expect(stat.status == 0, "\(stat.stderr)")
        #expect(stat.stdout.contains("records"), "\(stat.stdout)")
        let verify = try SpoolBinary.run(["verify", dir])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
        let dump = try SpoolBinary.run(["dump", dir])
        #expect(dump.stdout == "0\tfirst\n")
        // The writer was not disturbed: it goes on appending.
        input.fileHandleForWriting.write(Data("third\n".utf8))
        #expect(nextLine(of: output) == "1\n")
        try input.fileHandleForWriting.close()
        holder.waitUntilExit()
        #expect(holder.terminationStatus == 0)
        let after = try SpoolBinary.run(["dump", dir])
        #expect(after.stdout == "0\tfirst\n1\tthird\n")
    }
}
