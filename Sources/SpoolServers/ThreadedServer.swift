import Foundation

/// Python's `http.server.ThreadingHTTPServer` with its standard 5-connection accept queue, a
/// thread per connection and one request per connection (HTTP/1.0), never answering 429 or
/// 503: `Benchmarks/threaded-server.py`, run by `python3` in a process of its own on
/// 127.0.0.1. Past the queue the kernel drops connections and the client sends them again a
/// second later: the server's strain shows as stalls only. It counts the records it receives
/// (``received()``), so a test can check that a drain delivered every one.
///
/// If it cannot start, ``start()`` throws the reason: a test or benchmark that needs it fails.
///
/// Thread-safety: `Sendable`; ``stop()`` may be called from any task.
package final class ThreadedServer: @unchecked Sendable {
    /// The port it listens on, on 127.0.0.1.
    package let port: Int
    private let process: Process

    /// `http://127.0.0.1:<port>/batch`: where a sync worker posts.
    package var url: URL { URL(string: "http://127.0.0.1:\(port)/batch")! }

    private init(port: Int, process: Process) {
        self.port = port
        self.process = process
    }

    /// Starts the script on a free port and waits until it answers a `GET` 200 (polling every
    /// 50 ms, for at most 5 s).
    package static func start() async throws -> ThreadedServer {
        guard let python else { throw ServerError("python3 is not installed (the threaded server is Python's http.server)") }
        guard let script else { throw ServerError("Benchmarks/threaded-server.py is not found above \(#filePath)") }
        let port = try freePort()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script, String(port)]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let server = ThreadedServer(port: port, process: process)
        for _ in 0..<100 {
            if !process.isRunning { break }
            if (try? await HTTP.request("GET", "http://127.0.0.1:\(port)/", body: nil))?.status == 200 { return server }
            try? await Task.sleep(for: .milliseconds(50))
        }
        await server.stop()
        throw ServerError("python3 \(script) did not answer on port \(port)")
    }

    /// What the server has received so far: the `POST`s, and the distinct record ids among
    /// their bodies (Spool's JSON envelopes; a batch sent twice counts once).
    package func received() async throws -> (posts: Int, records: Int) {
        let answer = try await HTTP.request("GET", "http://127.0.0.1:\(port)/count", body: nil)
        guard answer.status == 200,
              let counts = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Int],
              let posts = counts["posts"], let records = counts["records"]
        else { throw ServerError("the threaded server's /count answered \(answer.status)") }
        return (posts, records)
    }

    /// Stops it (`Process.stop(within:)`: SIGTERM, then SIGKILL 5 s later), never
    /// waiting without a bound.
    ///
    /// - Returns: whether SIGTERM stopped it.
    @discardableResult
    package func stop() async -> Bool {
        await process.stop(within: .seconds(5))
    }

    /// `python3` on PATH.
    private static var python: String? {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/python3" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// The script, in the `Benchmarks` directory of the checkout this file was compiled from
    /// (the root package's `Sources/SpoolServers`, or `Benchmarks/Sources/BenchServers`, the
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
