#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import SpoolServers
import Synchronization

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers a `POST` with a redirect to `/moved`
/// (a `POST` to `/moved` itself, which only a 307 or 308 makes, with `200 {"accepted":1}`)
/// and every `GET` with `200 {"accepted":1}`: what a misconfigured load balancer in front of
/// a collector does. One connection at a time, closed after each answer. Counts requests by
/// method.
final class RedirectingServer: Sendable {
    let port: Int
    private let listener: Int32
    private let counts = Mutex<[String: Int]>([:])
    private let heads = Mutex<[String]>([])

    /// Starts listening on an ephemeral port and serving on a thread of its own.
    init(status: Int) throws {
        let (listener, port) = try loopbackSocket(listen: 16)
        self.listener = listener
        self.port = port
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // closed by `stop()`
                serve(connection, status: status)
                close(connection)
            }
        }
    }

    /// Every request's head (request line and headers), in the order they arrived.
    var requestHeads: [String] { heads.withLock { $0 } }

    /// How many requests of `method` arrived.
    func count(_ method: String) -> Int { counts.withLock { $0[method, default: 0] } }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ connection: Int32, status: Int) {
        guard let head = readRequest(connection), let method = head.split(separator: " ").first else { return }
        counts.withLock { $0[String(method), default: 0] += 1 }
        heads.withLock { $0.append(head) }
        let path = head.split(separator: " ").dropFirst().first ?? ""
        let answer = method == "POST" && path != "/moved"
            ? "HTTP/1.1 \(status) Redirect\r\nLocation: /moved\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            : "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{\"accepted\":1}"
        let bytes = Array(answer.utf8)
        _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, 0) }
    }

    /// Reads the head and the `Content-Length` body; returns the head.
    private func readRequest(_ connection: Int32) -> String? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let separator = Array("\r\n\r\n".utf8)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return nil }
            received += buffer[..<count]
            guard let end = received.indices.first(where: { received[$0...].starts(with: separator) }) else { continue }
            let head = String(decoding: received[..<end], as: UTF8.self)
            let length = head.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            if received.count - (end + separator.count) >= length { return head }
        }
    }
}
