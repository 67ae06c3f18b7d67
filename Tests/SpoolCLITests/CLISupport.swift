import Foundation
import Spool
import Synchronization

/// Runs the `spool` binary built next to the test bundle, with optional standard input.
struct SpoolBinary {
    /// `.build/<config>/spool`, beside the test bundle (override with SPOOL_BINARY).
    static var path: String {
        if let explicit = ProcessInfo.processInfo.environment["SPOOL_BINARY"] { return explicit }
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        // The bundle may be `…/debug/SpoolPackageTests.xctest` or a file inside it.
        while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("spool").path), directory.path != "/" {
            directory.deleteLastPathComponent()
        }
        return directory.appendingPathComponent("spool").path
    }

    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs `spool arguments…` to completion (with `environment` added to the test's); with
    /// `standardOutput`, its output goes to that file (such as /dev/full) and `stdout` is empty.
    static func run(_ arguments: [String], input: Data? = nil, standardOutput: String? = nil, environment: [String: String] = [:]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let out = Pipe()
        let err = Pipe()
        let inPipe = Pipe()
        if let standardOutput {
            guard let file = FileHandle(forWritingAtPath: standardOutput) else { throw CocoaError(.fileNoSuchFile) }
            process.standardOutput = file
            try? out.fileHandleForWriting.close()
        } else {
            process.standardOutput = out
        }
        process.standardError = err
        process.standardInput = input == nil ? FileHandle.nullDevice : inPipe
        try process.run()
        if let input {
            // A child may exit before reading all its input (refusing it): the write then fails
            // with EPIPE instead of killing the test process.
            signal(SIGPIPE, SIG_IGN)
            DispatchQueue.global().async {
                try? inPipe.fileHandleForWriting.write(contentsOf: input)
                try? inPipe.fileHandleForWriting.close()
            }
        }
        // Read both pipes concurrently so neither fills up.
        let stderrBox = DataBox()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async {
            stderrBox.set(err.fileHandleForReading.readDataToEndOfFile())
            group.leave()
        }
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        let stderrData = stderrBox.get()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                      stderr: String(decoding: stderrData, as: UTF8.self))
    }
}

/// What a child printed up to and including its next line break (the rest of the chunk that
/// held it too), or all it printed before it ended without one. Blocks until then.
func nextLine(of output: Pipe) -> String {
    var printed = Data()
    while !printed.contains(0x0A) {
        let chunk = output.fileHandleForReading.availableData
        if chunk.isEmpty { break }
        printed.append(chunk)
    }
    return String(decoding: printed, as: UTF8.self)
}

/// The lines of `text`, split at "\n" with empty ones dropped (as `split(separator: "\n")`),
/// as substrings of it: found with `memchr` over its UTF-8, since `split` walks Characters
/// grapheme by grapheme, which unspecialized (these tests build in debug) costs seconds for
/// the megabytes a dump or a collector's file holds.
func lines(of text: String) -> [Substring] {
    var text = text
    let offsets: [Range<Int>] = text.withUTF8 { bytes in
        var found: [Range<Int>] = []
        guard let base = bytes.baseAddress else { return found }
        var start = 0
        while start < bytes.count {
            let end = memchr(base + start, 0x0A, bytes.count - start).map { base.distance(to: $0.assumingMemoryBound(to: UInt8.self)) } ?? bytes.count
            if end > start { found.append(start..<end) }
            start = end + 1
        }
        return found
    }
    let utf8 = text.utf8
    return offsets.map { text[utf8.index(utf8.startIndex, offsetBy: $0.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: $0.upperBound)] }
}

/// A fresh temporary directory for one test.
func temporaryDirectory(_ name: String = #function) -> String {
    let path = NSTemporaryDirectory() + "spool-cli-tests/\(name.filter { $0.isLetter })-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Bytes handed from a reading thread to the test.
final class DataBox: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()
    func set(_ value: Data) { lock.withLock { data = value } }
    func get() -> Data { lock.withLock { data } }
}

/// A `spool append` child (64 KiB segments) fed 50 lines `p<process>-<n>-<padding>` every
/// 5 ms by a thread of its own, until it is killed; what it prints (with `ack`, the seqs it
/// acknowledged) is collected.
final class AppenderChild: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let stop = Mutex(false)
    private let printed = Mutex(Data())

    /// - Parameters:
    ///   - capped: with a 256 KiB cap, so the cap deletes segments.
    ///   - noisy: pad with hex digits instead of x's (they compress little, so the log rolls
    ///     and reaches its cap within a second or two).
    ///   - ack: `--ack`, so ``stdout`` holds the acknowledged seqs.
    ///   - writer: `--writer`: append to that writer's log in the group `directory`.
    init(directory: String, id: Int, capped: Bool = true, noisy: Bool = false, ack: Bool = false, writer: String? = nil) throws {
        process.executableURL = URL(fileURLWithPath: SpoolBinary.path)
        process.arguments = ["append", directory, "--durability", "written", "--segment-size", "\(64 * 1024)"]
            + (writer.map { ["--writer", $0] } ?? [])
            + (capped ? ["--max-bytes", "\(256 * 1024)"] : []) + (ack ? ["--ack"] : [])
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            while case let chunk = reader.availableData, !chunk.isEmpty { self.printed.withLock { $0.append(chunk) } }
        }
        let writer = input.fileHandleForWriting
        // The child is killed while this writes: the write then fails with EPIPE instead of
        // killing the test process (run alone, no other test has ignored SIGPIPE yet).
        signal(SIGPIPE, SIG_IGN)
        Thread.detachNewThread { [self] in
            var n = 0
            while !self.stop.withLock({ $0 }) {
                var chunk = ""
                for _ in 0..<50 {
                    let count = 40 + n % 200
                    var random = SplitMix64(seed: UInt64(n))
                    let padding = noisy ? String((0..<(count / 16 + 1)).map { _ in String(format: "%016llx", random.next()) }.joined().prefix(count))
                                        : String(repeating: "x", count: count)
                    chunk += "p\(id)-\(n)-" + padding + "\n"
                    n += 1
                }
                do { try writer.write(contentsOf: Data(chunk.utf8)) } catch { return }
                usleep(5_000)
            }
        }
    }

    /// SIGKILL, as a crash. Returns SIGKILL, or the exit status if it had ended by itself.
    @discardableResult
    func kill() -> Int32 {
        stop.withLock { $0 = true }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? input.fileHandleForWriting.close()
        return process.terminationReason == .uncaughtSignal ? SIGKILL : process.terminationStatus
    }

    /// What it printed so far.
    var stdout: String { String(decoding: printed.withLock { $0 }, as: UTF8.self) }
}
