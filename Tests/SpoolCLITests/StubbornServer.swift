import Foundation
import SpoolServers
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server on 127.0.0.1 that never accepts a batch: it answers every request 500
/// (``Behaviour/failing``), or reads it and never answers (``Behaviour/silent``). It counts
/// the requests whose head and body it received, so a test sees from outside how many times a
/// sync sent its batch. A thread per connection; keep-alive, as the sync's client uses it.
final class StubbornServer: @unchecked Sendable {
    enum Behaviour: Sendable, CustomStringConvertible {
        case failing, silent
        var description: String { self == .failing ? "always 500" : "never answers" }
    }

    let port: Int
    private let listener: Int32
    private let received = Tally()

    init(_ behaviour: Behaviour) throws {
        (listener, port) = try loopbackSocket(listen: 64)
        let (listener, received) = (self.listener, self.received)
        Thread.detachNewThread {
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread.detachNewThread { Self.serve(connection, behaviour, received) }
            }
        }
    }

    var url: String { "http://127.0.0.1:\(port)/batch" }

    /// Requests received so far.
    var requests: Int { received.value }

    /// Stops accepting connections (those open end when their client closes them).
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private static func serve(_ connection: Int32, _ behaviour: Behaviour, _ received: Tally) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            // Every complete request in the buffer: its head, then Content-Length bytes of body.
            while let end = buffer.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound {
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                guard buffer.count >= end + length else { break }
                buffer.removeFirst(end + length)
                received.add()
                if behaviour == .failing {
                    let answer = Array("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".utf8)
                    guard answer.withUnsafeBytes({ send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == answer.count else { return }
                }
            }
            let count = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            buffer += chunk[..<count]
        }
    }
}

/// A count that threads add to.
private final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
