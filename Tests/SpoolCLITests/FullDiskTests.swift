import Foundation
import Testing

/// A full disk, for real: `spool append` runs under a file-size limit (`ulimit -f`, with
/// SIGXFSZ ignored so writes past it fail with EFBIG instead of killing the process).
@Suite struct FullDiskTests {
    /// Runs `script` with /bin/sh; standard output and error go through files.
    func shell(_ script: String, in dir: String) throws -> (status: Int32, signaled: Bool, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let out = dir + "/sh.out", err = dir + "/sh.err"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        process.standardInput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal,
                (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Lines that compress poorly, so the limit is reached after a few dozen KiB.
    func lines(_ range: Range<Int>) -> [String] {
        range.map { i in
            var state = UInt64(i) &* 0x9E37_79B9_7F4A_7C15 &+ 1
            let digits = (0..<200).map { _ -> Character in
                state = state &* 6364136223846793005 &+ 1442695040888963407
                return Array("0123456789abcdef")[Int(state >> 60)]
            }
            return "{\"n\":\(i),\"p\":\"\(String(digits))\"}"
        }
    }

    @Test func appendOnAFullDiskFailsWithDiskFullKeepsWhatWasStoredAndRecovers() throws {
        let dir = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let log = dir + "/log"
        let first = lines(0..<20)
        let stored = try SpoolBinary.run(["append", log, "--ack", "--durability", "synced"], input: Data((first.joined(separator: "\n") + "\n").utf8))
        #expect(stored.status == 0, "\(stored.stderr)")

        // 3,000 more lines (about 650 KB) in 100 chunks, so some are acknowledged before the
        // 64-block limit (32 KiB in sh's 512-byte units) is reached: with no linger, each chunk
        // is written as it comes (a linger could gather, on a loaded machine, past the limit).
        let more = lines(20..<3020)
        for part in 0..<100 {
            let chunk = more[(part * 30)..<(part * 30 + 30)].joined(separator: "\n") + "\n"
            _ = FileManager.default.createFile(atPath: dir + "/part" + String(1000 + part), contents: Data(chunk.utf8))
        }
        let full = try shell("trap '' XFSZ; ulimit -f 64; for f in '\(dir)'/part*; do cat \"$f\"; sleep 0.01; done | '\(SpoolBinary.path)' append '\(log)' --ack --durability synced --linger 0", in: dir)
        #expect(!full.signaled, "append was killed by a signal instead of failing: \(full.stderr)")
        #expect(full.status != 0, "append did not fail under the file-size limit")
        #expect(full.stderr.contains("diskFull"), "the error does not say the disk is full: \(full.stderr.prefix(500))")
        let acknowledged = full.stdout.split(separator: "\n").compactMap { Int($0) }
        #expect(!acknowledged.isEmpty, "nothing was acknowledged before the disk filled up")
        #expect(acknowledged == Array(20..<(20 + acknowledged.count)), "acknowledgements are not a dense prefix")

        // Everything stored before, and everything acknowledged under the limit, reads back intact.
        let dump = try SpoolBinary.run(["dump", log])
        #expect(dump.status == 0, "\(dump.stderr)")
        let dumped = dump.stdout.split(separator: "\n").map(String.init)
        let expected = (first + more).enumerated().map { "\($0.offset)\t\($0.element)" }
        #expect(dumped.count >= 20 + acknowledged.count)
        #expect(Array(dumped.prefix(20 + acknowledged.count)) == Array(expected.prefix(20 + acknowledged.count)))
        #expect(dumped == Array(expected.prefix(dumped.count)), "a stored record differs from what was appended")
        let verify = try SpoolBinary.run(["verify", log])
        #expect(verify.status == 0, "\(verify.stdout)")

        // Space is back (a process without the limit): appending goes on after the last stored seq.
        let again = try SpoolBinary.run(["append", log, "--ack", "--durability", "synced"], input: Data("{\"again\":true}\n".utf8))
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout == "\(dumped.count)\n")
        let after = try SpoolBinary.run(["dump", log, "--from", "\(dumped.count)"])
        #expect(after.stdout == "\(dumped.count)\t{\"again\":true}\n")
    }
}
