import Foundation
import SpoolSync
#if canImport(SpoolServers)
import SpoolServers
#else
import BenchServers
#endif

/// Python's `http.server.ThreadingHTTPServer` with its standard 5-connection accept queue, a
/// thread per connection and one request per connection (HTTP/1.0), never answering 429 or
/// 503: `Benchmarks/threaded-server.py`, run by `python3` in a process of its own on
/// 127.0.0.1. Past the queue the kernel drops connections and the client retries them a
/// second later: the server's strain shows as stalls only.
///
/// If it cannot start, ``init()`` throws the reason: a benchmark that needs it fails.
///
/// Thread-safety: `stop()` may be called from any thread (it signals a pid and waits).
final class ThreadedServer: @unchecked Sendable {
    /// The port it listens on, on 127.0.0.1.
    let port: Int
    private let process: Process

    /// Starts the script on a free port and waits (blocking) until it answers a `GET` 200.
    init() throws {
        guard let python = Self.python else { throw BenchError("python3 is not installed (the threaded-server row runs Python's http.server)") }
        guard let script = Self.script else { throw BenchError("Benchmarks/threaded-server.py is not found above \(#filePath)") }
        port = try freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, String(port)]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<100 {
            if !process.isRunning { break }
            if (try? HTTP.requestBlocking("GET", "http://127.0.0.1:\(port)/", body: nil))?.status == 200 { return }
            usleep(50_000)
        }
        stop()
        throw BenchError("python3 \(script) did not answer on port \(port)")
    }

    /// Stops it (SIGTERM) and waits for it to exit.
    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// `python3` on PATH.
    private static var python: String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/python3" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The script, in the `Benchmarks` directory of the checkout this file was compiled from
    /// (the root package's `Sources/SpoolBench`, or `Benchmarks/Sources/BenchScenarios`, the
    /// same directory through a link).
    private static var script: String? {
        var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while directory.path != "/" {
            let candidate = directory.appendingPathComponent("Benchmarks/threaded-server.py").path
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        return nil
    }
}

extension SpoolSide {
    /// Stores `count` events (untimed) and times one flush of them, in batches of `batch`,
    /// to a ``ThreadedServer``.
    public func drainToThreadedServer(batch: Int, count: Int, directory: String, concurrency: SyncConfiguration.Concurrency) async throws -> Run {
        let server = try await blocking { try ThreadedServer() }
        let url = URL(string: "http://127.0.0.1:\(server.port)/batch")!
        do {
            let run = try await drain(batch: batch, batchBytes: nil, count: count, directory: directory, concurrency: concurrency, backoff: nil) {
                log, configuration in
                HTTPSink(uploader: platformUploader(url: url), logID: log, configuration: configuration)
            }
            try await blocking { server.stop() }
            return run
        } catch {
            try await blocking { server.stop() }
            throw error
        }
    }
}
