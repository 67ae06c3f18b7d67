import Foundation

/// A real child process (`spool …`) with pipes on its standard input and output, killed with
/// SIGKILL by the crash tester. Not thread-safe: one owner; its pipes are served by threads.
final class ChildProcess: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lock = NSLock()
    private var outputLines: [String] = []
    private var partial = Data()
    private let outputDone = DispatchSemaphore(value: 0)
    /// Guarded by `lock`: set once `finish` saw the child exit (its pid may be reused after).
    private var finished = false
    /// Guarded by `lock`: the watchdog killed the child.
    private var killedByWatchdog = false

    init(executable: String, arguments: [String]) {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
    }

    func start() throws {
        try process.run()
        let reader = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                lock.withLock {
                    partial.append(data)
                    while let newline = partial.firstIndex(of: 0x0A) {
                        outputLines.append(String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
                        partial.removeSubrange(partial.startIndex...newline)
                    }
                }
            }
            outputDone.signal()
        }
    }

    /// Writes to the child's standard input; false once the child is gone.
    func write(_ data: Data) -> Bool {
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Foundation.write(input.fileHandleForWriting.fileDescriptor, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }

    /// Complete lines the child has printed so far.
    var lineCount: Int { lock.withLock { outputLines.count } }

    func closeInput() {
        try? input.fileHandleForWriting.close()
    }

    func kill() {
        Foundation.kill(process.processIdentifier, SIGKILL)
    }

    /// Kills the child after `seconds` unless it has finished by then: a child that stops
    /// reading its input (a deadlock, just what a crash test looks for) would otherwise block
    /// the tester's writes for ever. ``hung`` then says so.
    func startWatchdog(seconds: Double) {
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            lock.withLock {
                guard !finished, process.isRunning else { return }
                killedByWatchdog = true
                Foundation.kill(process.processIdentifier, SIGKILL)
            }
        }
    }

    /// Whether the watchdog had to kill the child.
    var hung: Bool { lock.withLock { killedByWatchdog } }

    /// Waits for the child to exit and for its output to be read; returns every complete line.
    func finish() -> (status: Int32, reason: Process.TerminationReason, lines: [String]) {
        process.waitUntilExit()
        lock.withLock { finished = true }
        try? input.fileHandleForWriting.close()
        outputDone.wait()
        return (process.terminationStatus, process.terminationReason, lock.withLock { outputLines })
    }
}
