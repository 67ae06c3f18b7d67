import Foundation
import Testing

/// `spool append --dictionary` and `--key-file`: the CLI writes dictionary-compressed and
/// encrypted logs (so crash-testing users can make them), and `dump` keeps what it read when a
/// later block cannot be read.
@Suite struct AppendCodecTests {
    func write(_ path: String, _ text: String) -> String {
        _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
        return path
    }

    func hex(_ byte: UInt8) -> String { String(repeating: String(format: "%02x", byte), count: 32) }

    @Test func appendWritesADictionaryCompressedEncryptedLogThatOnlyItsKeyReads() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let dictionary = write(dir + "/dict", String(repeating: "{\"event\":\"screen_view\",\"screen\":\"home\"}", count: 20))
        // A comment after the key, as the help allows.
        let keys = write(dir + "/keys", "# laptop\n3 \(hex(0x5a))   # the current key\n")
        let lines = (0..<50).map { "{\"event\":\"screen_view\",\"screen\":\"home\",\"n\":\($0)}" }
        let append = try SpoolBinary.run(["append", log, "--dictionary", dictionary, "--key-file", keys, "--durability", "synced"],
                                         input: Data((lines.joined(separator: "\n") + "\n").utf8))
        #expect(append.status == 0, "\(append.stderr)")
        let segment = try #require(FileManager.default.contents(atPath: log + "/00000000000000000000.seg"))
        #expect(segment.range(of: Data("screen_view".utf8)) == nil, "no plaintext on disk")
        let files = try FileManager.default.contentsOfDirectory(atPath: log + "/dictionaries")
        #expect(files.contains { $0.hasSuffix(".zdict") })
        #expect(try FileManager.default.contentsOfDirectory(atPath: log + "/keys") == ["0000000003.check"])
        let dump = try SpoolBinary.run(["dump", log, "--key-file", keys])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdout == lines.enumerated().map { "\($0.offset)\t\($0.element)\n" }.joined())
        let without = try SpoolBinary.run(["dump", log])
        #expect(without.status != 0 && without.stderr.contains("key 3"), "\(without.stderr)")
    }

    @Test func appendRefusesAKeyChoiceItCannotMake() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let two = write(dir + "/two", "1 \(hex(1))\n2 \(hex(2))\n")
        let input = Data("a\n".utf8)
        let ambiguous = try SpoolBinary.run(["append", dir + "/log", "--key-file", two], input: input)
        #expect(ambiguous.status != 0 && ambiguous.stderr.contains("--key-id"), "\(ambiguous.stderr)")
        let unknown = try SpoolBinary.run(["append", dir + "/log", "--key-file", two, "--key-id", "9"], input: input)
        #expect(unknown.status != 0 && unknown.stderr.contains("--key-id 9"), "\(unknown.stderr)")
        let alone = try SpoolBinary.run(["append", dir + "/log", "--key-id", "1"], input: input)
        #expect(alone.status != 0 && alone.stderr.contains("--key-file"), "\(alone.stderr)")
    }

    /// Records under key 1, then records under key 2; `dump` with key 1 only stops at the first
    /// block it cannot read, but prints every record it read before it. Before the fix they
    /// were buffered and lost with the error.
    @Test func dumpPrintsTheRecordsItReadBeforeABlockItCannotRead() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let both = write(dir + "/both", "1 \(hex(1))\n2 \(hex(2))\n")
        let first = try SpoolBinary.run(["append", log, "--key-file", both, "--key-id", "1"], input: Data("one\ntwo\nthree\n".utf8))
        #expect(first.status == 0, "\(first.stderr)")
        let second = try SpoolBinary.run(["append", log, "--key-file", both, "--key-id", "2"], input: Data("four\n".utf8))
        #expect(second.status == 0, "\(second.stderr)")
        let onlyFirst = write(dir + "/first", "1 \(hex(1))\n")
        let dump = try SpoolBinary.run(["dump", log, "--key-file", onlyFirst])
        #expect(dump.status != 0)
        #expect(dump.stderr.contains("key 2"), "\(dump.stderr)")
        #expect(dump.stdout == "0\tone\n1\ttwo\n2\tthree\n")
    }
}
