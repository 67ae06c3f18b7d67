#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AsyncHTTPClient
import NIOCore
import Spool
import SpoolSync

/// The Google Cloud CLI's Pub/Sub emulator, started once per process (the Pub/Sub tests, the
/// benchmark) on a free port of 127.0.0.1 in a data directory of its own, and stopped (its
/// whole process group) by a watchdog once that process is gone.
///
/// If it cannot start, ``shared()`` throws the reason, with the end of its output: a test that
/// needs it fails, it is never skipped.
package final class PubSubEmulator: Sendable {
    /// The port it listens on, on 127.0.0.1.
    package let port: Int
    /// `http://127.0.0.1:<port>`: the root of its REST API.
    package let root: URL

    /// The one emulator of this process, started on first use.
    package static func shared() async throws -> PubSubEmulator {
        try await Shared.instance.emulator()
    }

    private actor Shared {
        static let instance = Shared()
        /// The one start: a task, so that callers arriving while it runs wait for it rather
        /// than start emulators of their own (an actor is reentrant at each `await`).
        private var starting: Task<PubSubEmulator, any Error>?

        func emulator() async throws -> PubSubEmulator {
            if let starting { return try await starting.value }
            let task = Task { try await PubSubEmulator.start() }
            starting = task
            return try await task.value
        }
    }

    /// Why the emulator could not start, or a call to it failed.
    package struct StartFailed: Error, CustomStringConvertible {
        /// What went wrong, with the end of the emulator's output when it did not start.
        package var description: String
    }

    private init(port: Int) {
        self.port = port
        self.root = URL(string: "http://127.0.0.1:\(port)")!
    }

    private static func start() async throws -> PubSubEmulator {
        guard let gcloud = ["/usr/bin/gcloud", "/usr/lib/google-cloud-sdk/bin/gcloud"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw StartFailed(description: "the Pub/Sub emulator cannot start: gcloud (the Google Cloud CLI with google-cloud-cli-pubsub-emulator) is not installed")
        }
        let port = try freePort()
        let data = FileManager.default.temporaryDirectory.appendingPathComponent("spool-pubsub-\(getpid())-\(port)")
        try FileManager.default.createDirectory(at: data, withIntermediateDirectories: true)
        let log = data.appendingPathComponent("emulator.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        // `setsid`: the emulator (gcloud, then Java) in a process group of its own, stopped whole.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
        process.arguments = [gcloud, "beta", "emulators", "pubsub", "start", "--host-port=127.0.0.1:\(port)", "--data-dir=\(data.path)"]
        let handle = try FileHandle(forWritingTo: log)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let emulator = PubSubEmulator(port: port)
        try watchOver(port: port, data: data.path)
        for _ in 0..<240 {
            if !process.isRunning { break }
            if (try? await emulator.request("GET", "/", body: nil))?.status == 200 { return emulator }
            try await Task.sleep(for: .milliseconds(250))
        }
        emulator.stop()
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        throw StartFailed(description: "the Pub/Sub emulator did not answer on 127.0.0.1:\(port) within 60 s; its output ends:\n\(output.suffix(2000))")
    }

    /// Stops the emulator and the processes it started.
    package func stop() {
        let stopper = Process()
        stopper.executableURL = URL(fileURLWithPath: "/bin/sh")
        stopper.arguments = ["-c", stopCommand(port: port)]
        try? stopper.run()
        stopper.waitUntilExit()
    }

    /// Creates `topic` (`projects/P/topics/T`) and a subscription to it, with message ordering when asked.
    package func createTopic(_ topic: String, subscription: String, ordering: Bool = false) async throws {
        let made = try await request("PUT", "/v1/\(topic)", body: nil)
        guard made.status == 200 else { throw StartFailed(description: "creating \(topic) answered \(made.status)") }
        let body = #"{"topic":"\#(topic)","enableMessageOrdering":\#(ordering)}"#
        let sub = try await request("PUT", "/v1/\(subscription)", body: Array(body.utf8))
        guard sub.status == 200 else { throw StartFailed(description: "creating \(subscription) answered \(sub.status)") }
    }

    /// Creates a topic and a subscription of their own for one test or run:
    /// `projects/spool-test/topics/<name>-<8 random hex digits>`, and the same name under
    /// `subscriptions/`.
    package func createTopic(named name: String) async throws -> (topic: String, subscription: String) {
        let unique = "\(name)-\(UUID().uuidString.prefix(8).lowercased())"
        let names = (topic: "projects/spool-test/topics/\(unique)", subscription: "projects/spool-test/subscriptions/\(unique)")
        try await createTopic(names.topic, subscription: names.subscription)
        return names
    }

    /// A message as a subscriber receives it.
    package struct Message: Decodable, Sendable {
        /// The data, in base64.
        package var data: String?
        /// The attributes.
        package var attributes: [String: String]?
        /// The ordering key, if any.
        package var orderingKey: String?
        /// The data's bytes.
        package var bytes: [UInt8] { Array(Data(base64Encoded: data ?? "") ?? Data()) }
    }

    /// Pulls (and acknowledges) everything the subscription holds now, in delivery order,
    /// until a pull comes back empty.
    package func pullAll(_ subscription: String) async throws -> [Message] {
        // On a thread of its own: the pulls block, and must not hold a cooperative thread.
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try self.pullAllBlocking(subscription) }) }.start()
        }
    }

    /// ``pullAll(_:)`` on the caller's thread, blocking it (no cooperative thread is needed:
    /// for tests that block theirs while child processes run).
    package func pullAllBlocking(_ subscription: String) throws -> [Message] {
        struct Pulled: Decodable {
            struct Received: Decodable {
                var ackId: String
                var message: Message
            }
            var receivedMessages: [Received]?
        }
        var all: [Message] = []
        while true {
            let answer = try HTTP.requestBlocking("POST", url("/v1/\(subscription):pull"), body: Array(#"{"maxMessages":1000,"returnImmediately":true}"#.utf8))
            guard answer.status == 200 else { throw StartFailed(description: "pull answered \(answer.status)") }
            let pulled = try JSONDecoder().decode(Pulled.self, from: Data(answer.body)).receivedMessages ?? []
            if pulled.isEmpty { return all }
            all += pulled.map(\.message)
            let acks = try JSONSerialization.data(withJSONObject: ["ackIds": pulled.map(\.ackId)])
            _ = try HTTP.requestBlocking("POST", url("/v1/\(subscription):acknowledge"), body: Array(acks))
        }
    }

    /// Sends `method path` with a JSON `body` to the emulator; returns the status and the body.
    package func request(_ method: String, _ path: String, body: [UInt8]?) async throws -> (status: Int, body: [UInt8]) {
        try await HTTP.request(method, url(path), body: body)
    }

    /// The URL of `path` of its REST API (a resource's `:verb` kept as it is).
    private func url(_ path: String) -> String {
        root.appendingPathComponent(path).absoluteString.replacingOccurrences(of: "%3A", with: ":")
    }
}

/// The command that stops the emulator on `port` and every process it started (gcloud's Python
/// and the Java server): found by the port on their command lines, not by a process group,
/// which gcloud's launcher does not keep.
func stopCommand(port: Int) -> String {
    // Patterns that do not match themselves: the shell running them has them on its command line.
    let patterns = ["'127[.]0[.]0[.]1:\(port)'", "'[-]-port=\(port)'"]
    return patterns.map { "pkill -TERM -f -- \($0)" }.joined(separator: "; ") + "; sleep 1; "
        + patterns.map { "pkill -KILL -f -- \($0)" }.joined(separator: "; ")
}

/// A watchdog, in a session of its own, that stops the emulator and removes its data once this
/// process is gone, however it ended (an exit, a SIGKILL, a timeout): no emulator outlives the
/// process that started it.
private func watchOver(port: Int, data: String) throws {
    let script = """
        while [ -d /proc/\(getpid()) ]; do sleep 1; done
        \(stopCommand(port: port))
        rm -rf '\(data)'
        """
    let watchdog = Process()
    watchdog.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
    watchdog.arguments = ["/bin/sh", "-c", script]
    watchdog.standardInput = FileHandle.nullDevice
    watchdog.standardOutput = FileHandle.nullDevice
    watchdog.standardError = FileHandle.nullDevice
    try watchdog.run()
}

/// Plain HTTP requests: the emulator's administration (topics, pulls) and the plain publisher.
package enum HTTP {
    /// Sends `method url` with a JSON `body`; returns the status and the whole answer.
    package static func request(_ method: String, _ url: String, body: [UInt8]?, headers: [String: String] = [:]) async throws -> (status: Int, body: [UInt8]) {
        var request = HTTPClientRequest(url: url)
        request.method = .init(rawValue: method)
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        return (Int(response.status.code), Array(bytes.readableBytesView))
    }

    /// ``request(_:_:body:headers:)`` on the caller's thread, blocking it until the answer (or
    /// 60 s): for callers that may not wait for a cooperative thread.
    package static func requestBlocking(_ method: String, _ url: String, body: [UInt8]?, headers: [String: String] = [:]) throws -> (status: Int, body: [UInt8]) {
        var request = try HTTPClient.Request(url: url, method: .init(rawValue: method))
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.replaceOrAdd(name: name, value: value) }
        if let body { request.body = .bytes(body) }
        let response = try HTTPClient.shared.execute(request: request, deadline: .now() + .seconds(60)).wait()
        return (Int(response.status.code), response.body.map { Array($0.readableBytesView) } ?? [])
    }
}
