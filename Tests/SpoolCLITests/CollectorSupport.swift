import Foundation
import SpoolServers
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Spool
import Testing

/// A `spool collector` child on 127.0.0.1: started through /bin/sh (`exec`, so signals reach
/// the collector itself) with SIGXFSZ ignored, so a file-size limit set later (`prlimit`)
/// makes writes fail with EFBIG as on a full disk instead of killing it. Its standard error
/// goes to a file, read by ``stderr``.
final class CollectorChild: @unchecked Sendable {
    let process = Process()
    let port: Int
    let stderrPath: String

    /// Starts `spool collector --port port arguments…` and waits for its listening line.
    init(_ arguments: [String], port: Int = 0, stderrPath: String) throws {
        self.stderrPath = stderrPath
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "trap '' XFSZ; exec \"$0\" collector --port \(port) \"$@\"", SpoolBinary.path] + arguments
        let output = Pipe()
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        errors.seekToEndOfFile()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let listening = nextLine(of: output)
        guard let found = Self.port(in: listening) else {
            process.waitUntilExit()
            throw CollectorStartFailure(message: "the collector did not start: \(listening) \((try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")")
        }
        self.port = found
        // Keep reading standard output (the final counts) so the pipe never fills.
        Thread.detachNewThread { [printed] in
            while case let data = output.fileHandleForReading.availableData, !data.isEmpty {
                printed.set(printed.get() + data)
            }
        }
    }

    /// What it wrote on standard output after its listening line (its counts, once stopped).
    var stdout: String { String(decoding: printed.get(), as: UTF8.self) }
    private let printed = DataBox()

    /// The port of a `listening on HOST:PORT` line; nil for any other line.
    static func port(in listening: String) -> Int? {
        guard listening.hasPrefix("listening on ") else { return nil }
        return listening.split(separator: ":").last.flatMap { Int($0.prefix { $0.isNumber }) }
    }

    var url: String { "http://127.0.0.1:\(port)/batch" }
    var pid: Int32 { process.processIdentifier }

    /// SIGKILL, as a crash (nothing once it has ended: its pid may be another's by then).
    func kill() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// SIGTERM, and waits for the graceful stop.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    /// What it wrote on standard error so far.
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
}

struct CollectorStartFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// `GET url`: the status and body (status 0 when no answer came).
func httpGet(_ url: String) -> (status: Int, body: String) {
    httpRequest(URLRequest(url: URL(string: url)!))
}

/// `POST url` with `body` and `headers`: the status and body (status 0 when no answer came).
func httpPost(_ url: String, body: Data, headers: [String: String]) -> (status: Int, body: String) {
    var request = URLRequest(url: URL(string: url)!)
    request.httpMethod = "POST"
    request.httpBody = body
    for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
    return httpRequest(request)
}

/// Sends `request` (10 s timeout): the status and body (status 0 when no answer came).
private func httpRequest(_ request: URLRequest) -> (status: Int, body: String) {
    let done = DispatchSemaphore(value: 0)
    let result = Mutexed<(Int, String)>((0, ""))
    var request = request
    request.timeoutInterval = 10
    URLSession.shared.dataTask(with: request) { data, response, _ in
        result.set(((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data ?? Data(), as: UTF8.self)))
        done.signal()
    }.resume()
    done.wait()
    return result.get()
}

/// A value handed between threads.
final class Mutexed<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T
    init(_ value: T) { self.value = value }
    func set(_ new: T) { lock.withLock { value = new } }
    func get() -> T { lock.withLock { value } }
}

/// The origin records of a collector's log, read with `spool dump` (which prints each, being
/// binary, as `base64:`), in the log's order.
func dumpOrigins(_ directory: String) throws -> [OriginRecord] {
    let dump = try SpoolBinary.run(["dump", directory])
    guard dump.status == 0 else { throw CollectorStartFailure(message: "spool dump failed: \(dump.stderr)") }
    return try dump.stdout.split(separator: "\n").map { line in
        let payload = line.split(separator: "\t", maxSplits: 1).last ?? ""
        guard payload.hasPrefix("base64:"), let bytes = Data(base64Encoded: String(payload.dropFirst(7))) else {
            throw CollectorStartFailure(message: "not an origin record: \(line.prefix(80))")
        }
        return try OriginRecord.decode(Array(bytes))
    }
}

/// The `--out` file of a collector: each line's `id`, and its object.
func collectedLines(_ path: String) throws -> [(id: String, object: [String: Any])] {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    return try text.split(separator: "\n").map { line in
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        return (try #require(object["id"] as? String), object)
    }
}

/// Appends `count` JSON records `{"device":d,"n":i,…}` to a new device log (synced) and
/// returns its id.
@discardableResult
func makeDeviceLog(_ directory: String, device: Int, count: Int) throws -> LogID {
    let lines = (0..<count).map { #"{"device":\#(device),"n":\#($0),"event":"screen_view","pad":"\#(String(repeating: "x", count: $0 % 97))"}"# }
    let appended = try SpoolBinary.run(["append", directory, "--durability", "synced"], input: Data((lines.joined(separator: "\n") + "\n").utf8))
    guard appended.status == 0 else { throw CollectorStartFailure(message: "spool append failed: \(appended.stderr)") }
    return try withEventLog(directory: directory) { $0.id }
}
