import Foundation

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

    /// Runs `spool arguments…` to completion; with `standardOutput`, its output goes to that
    /// file (such as /dev/full) and `stdout` is empty.
    static func run(_ arguments: [String], input: Data? = nil, standardOutput: String? = nil) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
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
