import Foundation
import Spool
import Testing

/// `--key-file` on the reading commands, against a log encrypted by the library: the right key
/// reads it, a missing, wrong or malformed key is a clear error that shows no payload, and no
/// reading command leaves a file behind.
@Suite struct KeyFileTests {
    /// Every file under `path` with its size.
    func listing(_ path: String) -> [String: Int] {
        var files = [String: Int]()
        let enumerator = FileManager.default.enumerator(atPath: path)
        while let name = enumerator?.nextObject() as? String {
            files[name] = (try? FileManager.default.attributesOfItem(atPath: path + "/" + name)[.size] as? Int) ?? -1
        }
        return files
    }

    @Test func encryptedLogsReadWithTheirKeyFileOnly() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let key = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        var configuration = Configuration()
        configuration.encryption = .init(keys: [7: key], current: 7)
        try withEventLog(directory: log, configuration: configuration) { log in
            for i in 0..<3 { _ = try log.append("secret \(i)") }
        }
        // The segment holds no plaintext.
        let segment = try #require(FileManager.default.contents(atPath: log + "/00000000000000000000.seg"))
        #expect(segment.range(of: Data("secret".utf8)) == nil)

        func keyFile(_ name: String, _ text: String) -> String {
            let path = dir + "/" + name
            _ = FileManager.default.createFile(atPath: path, contents: Data(text.utf8))
            return path
        }
        let hex = key.map { String(format: "%02x", $0) }.joined()
        let right = keyFile("right", "# the log's key\n7 \(hex)\n")
        let wrong = keyFile("wrong", "7 \(String(repeating: "ab", count: 32))\n")
        let malformed = keyFile("malformed", "7 not-hex\n")
        let before = listing(log)

        let dump = try SpoolBinary.run(["dump", log, "--key-file", right])
        #expect(dump.status == 0, "\(dump.stderr)")
        #expect(dump.stdout == "0\tsecret 0\n1\tsecret 1\n2\tsecret 2\n")
        let verify = try SpoolBinary.run(["verify", log, "--key-file", right])
        #expect(verify.status == 0 && verify.stdout.contains("records    3"), "\(verify.stdout)")
        #expect(try SpoolBinary.run(["stat", log, "--key-file", right]).status == 0)

        let without = try SpoolBinary.run(["dump", log])
        #expect(without.status != 0)
        #expect(without.stderr.contains("key 7"), "\(without.stderr)")
        let mismatched = try SpoolBinary.run(["verify", log, "--key-file", wrong])
        #expect(mismatched.status != 0)
        #expect(mismatched.stderr.contains("key 7 is not the key"), "\(mismatched.stderr)")
        let unparsable = try SpoolBinary.run(["dump", log, "--key-file", malformed])
        #expect(unparsable.status != 0)
        #expect(unparsable.stderr.contains("key file line 1"), "\(unparsable.stderr)")
        for result in [without, mismatched, unparsable] {
            #expect(!result.stderr.contains("secret") && !result.stdout.contains("secret"), "a payload was shown")
            #expect(!result.stderr.contains(hex), "a key was shown")
        }
        #expect(listing(log) == before, "a reading command changed the log's files")
    }
}
