import Foundation

/// A TCP client of 127.0.0.1 on a raw socket, blocking, for one thread: it sends bytes as
/// given (a body slower than any HTTP library sends it, a length it never sends, a transfer
/// coding a library refuses) and reads the answer, every wait bounded by `timeout` seconds.
final class LoopbackSocket: @unchecked Sendable {
    private let fd: Int32

    init(port: Int, timeout: Int = 30) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var limit = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// Sends all of `bytes`; false when the connection refused them (closed, reset, or the
    /// timeout passed).
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return false }
            sent += count
        }
        return true
    }

    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Whether the server wrote something (or closed) within `milliseconds`.
    func readable(within milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }

    /// One answer: its status (0 if none came), head and body, read up to its
    /// `Content-Length`; `closed` when the server closed (or reset) the connection before that.
    func answer() -> Answer {
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !Answer.isComplete(bytes) {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 || (count < 0 && errno == ECONNRESET) { return Answer(bytes, closed: true) }
            if count < 0 { break }
            bytes += buffer[..<count]
        }
        return Answer(bytes, closed: false)
    }

    /// Whether the server closes the connection (end of stream or a reset) within the timeout,
    /// what it still sends being dropped.
    func closesByServer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
            if count < 0 { return false }
        }
    }

    /// An HTTP/1.1 answer as read from the socket.
    struct Answer {
        let head: String
        let body: String
        let closed: Bool

        init(_ bytes: [UInt8], closed: Bool) {
            let text = String(decoding: bytes, as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            head = parts[0]
            body = parts.dropFirst().joined(separator: "\r\n\r\n")
            self.closed = closed
        }

        var status: Int { head.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0 }

        /// The value of the header `name` (any case), if present.
        func header(_ name: String) -> String? {
            head.split(separator: "\r\n").dropFirst().first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
                .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
        }

        /// Whether `bytes` hold a whole head and as much body as its `Content-Length` says.
        static func isComplete(_ bytes: [UInt8]) -> Bool {
            let answer = Answer(bytes, closed: false)
            guard String(decoding: bytes, as: UTF8.self).contains("\r\n\r\n") else { return false }
            return answer.body.utf8.count >= (answer.header("Content-Length").flatMap { Int($0) } ?? 0)
        }
    }
}

/// Runs `body` on a thread of its own (blocking sockets must not hold the cooperative pool).
func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// A one-record JSON batch request (`Spool-Batch` of `log`, seq `seq`), as bytes to send.
func oneRecordRequest(log: String, seq: Int, extraHeaders: String = "") -> String {
    let body = #"[{"id":"\#(log)-\#(seq)","seq":\#(seq),"time":0,"data":{"n":\#(seq)}}]"#
    return "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nSpool-Batch: \(log):\(seq)-\(seq)\r\n"
        + extraHeaders + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
}
