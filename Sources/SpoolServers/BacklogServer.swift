#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A single-threaded HTTP server with a small accept queue, as Python's `http.server` is
/// (listen backlog 5, one request at a time, one connection per request): the overloaded
/// server of issue #26. When more connections arrive than the queue holds, the kernel drops
/// their SYNs and the client sends them again a second later: latency soars with no 429 or
/// 503. Every request is answered 200 after `serviceTime` (the server's own work).
///
/// Benchmark use only: it parses just enough HTTP/1.1 for the sync worker's POSTs.
package final class BacklogServer: Sendable {
    package let port: Int
    private let descriptor: Int32
    private let stopped = Atomic<Bool>(false)
    private let done = Mutex<CheckedContinuation<Void, Never>?>(nil)
    private let finished = Atomic<Bool>(false)

    /// Listens on 127.0.0.1 on an ephemeral port with a `backlog` of pending connections,
    /// and serves on a thread of its own until ``stop()``.
    package init(backlog: Int32 = 5, serviceTime: Duration = .milliseconds(1)) throws {
        let (fd, port) = try loopbackSocket(listen: backlog)
        descriptor = fd
        self.port = port
        // Public API only (Benchmarks/ compiles this file too, outside Spool's package).
        let (seconds, attoseconds) = serviceTime.components
        let micros = UInt32(max(0, Double(seconds) * 1e6 + Double(attoseconds) / 1e12))
        Thread.detachNewThread { [self] in
            serve(serviceMicros: micros)
        }
    }

    private func serve(serviceMicros: UInt32) {
        while !stopped.load(ordering: .relaxed) {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else { continue }
            _ = answer(connection, serviceMicros: serviceMicros)
            close(connection)
        }
        finished.store(true, ordering: .relaxed)
        done.withLock { $0?.resume(); $0 = nil }
    }

    /// Reads one request (headers, then `Content-Length` bytes of body) and answers 200.
    private func answer(_ connection: Int32, serviceMicros: UInt32) -> Bool {
        var received = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        var headerEnd: Int?
        var bodyLength = 0
        while true {
            let count = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
            guard count > 0 else { return false }
            received += buffer[..<count]
            if headerEnd == nil, let end = Self.find([13, 10, 13, 10], in: received) {
                headerEnd = end + 4
                let head = String(decoding: received[..<end], as: UTF8.self).lowercased()
                for line in head.split(separator: "\r\n") where line.hasPrefix("content-length:") {
                    bodyLength = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            if let headerEnd, received.count >= headerEnd + bodyLength { break }
        }
        if serviceMicros > 0 { usleep(serviceMicros) }
        let response = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8)
        return response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) } == response.count
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Stops serving and waits for the serving thread to end.
    package func stop() async {
        stopped.store(true, ordering: .relaxed)
        shutdown(descriptor, Int32(SHUT_RDWR))
        await withCheckedContinuation { continuation in
            let already = done.withLock { state -> Bool in
                if finished.load(ordering: .relaxed) { return true }
                state = continuation
                return false
            }
            if already { continuation.resume() }
        }
        close(descriptor)
    }
}
