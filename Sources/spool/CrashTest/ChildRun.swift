import Foundation

/// A child process run to its end with its output in files (no pipe can fill up), for the
/// readers the corruption rounds start: a crash shows as a signal, a hang as `hung`.
struct ChildRun {
    var status: Int32
    var signaled: Bool
    var hung: Bool
    var stdout: String
    var stderr: String

    /// Runs `executable arguments…`; past `hangAfter` seconds it is killed and reported hung.
    /// The limit detects a hang (a loop that never ends); it says nothing about speed.
    static func run(_ executable: String, _ arguments: [String], scratch: String, hangAfter: Double = 120) throws -> ChildRun {
        let outPath = scratch + "/child.out"
        let errPath = scratch + "/child.err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let deadline = Date().addingTimeInterval(hangAfter)
        var hung = false
        while process.isRunning {
            if Date() > deadline {
                hung = true
                kill(process.processIdentifier, SIGKILL)
                break
            }
            Thread.sleep(forTimeInterval: 0.005)
        }
        process.waitUntilExit()
        try? out.close()
        try? err.close()
        return ChildRun(status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal, hung: hung,
                        stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
                        stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }
}
