import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
@testable import SpoolCollector

/// The bound on requests in flight, over real HTTP on 127.0.0.1.
@Suite struct OverloadTests {
    /// A batch request whose body arrives in two parts: the second only when `release` is
    /// called, so the collector holds the request in flight until then.
    struct HeldRequest {
        let answer: Task<Answer, any Error>
        let release: @Sendable () -> Void

        init(_ server: TestServer, seq: UInt64) {
            let bytes = body(.json, seqs: seq...seq)
            let (chunks, continuation) = AsyncStream.makeStream(of: ByteBuffer.self)
            continuation.yield(ByteBuffer(bytes: bytes.prefix(1)))
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(server.port)/batch")
            request.method = .POST
            for (name, value) in TestFormat.json.headers { request.headers.add(name: name, value: value) }
            request.headers.add(name: "Spool-Batch", value: "\(testLog):\(seq)-\(seq)")
            request.body = .stream(chunks, length: .known(Int64(bytes.count)))
            answer = Task { [request] in
                let response = try await testClient.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: 1 << 20)
                return Answer(status: Int(response.status.code), headers: [:], body: String(buffer: body))
            }
            release = {
                continuation.yield(ByteBuffer(bytes: bytes.dropFirst()))
                continuation.finish()
            }
        }
    }

    /// Past the slots: 503, counted as overloaded, without `Retry-After` (a slot frees within
    /// a round trip; `Retry-After: 1` made every sender wait a second for it).
    @Test func requestsPastTheLimitAreAnswered503WithoutRetryAfter() async throws {
        // Injected latency holds each request in its slot after its body arrived.
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 2
            $0.faults.latency = .seconds(10)  // long enough that a loaded machine still sends the third within it
        }
        let held = (UInt64(0)...1).map { seq in
            Task { try await server.post(batch: body(.json, seqs: seq...seq), seqs: seq...seq, format: .json) }
        }
        // Both are in the handler (holding their slots) and wait out their latency.
        for _ in 0..<30_000 where server.collector.inFlight.withLock({ $0 }) < 2 {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(server.collector.inFlight.withLock { $0 } == 2)

        let refused = try await server.post(batch: body(.json, seqs: 2...2), seqs: 2...2, format: .json)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == nil)  // a slot frees within a round trip
        #expect(refused.header("Spool-Max-Concurrent-Requests") == "2")  // what it takes at once
        #expect(server.collector.stats.overloaded == 1)

        for request in held { #expect(try await request.value.status == 200) }
        // The slots are free again.
        let accepted = try await server.post(batch: body(.json, seqs: 2...2), seqs: 2...2, format: .json)
        #expect(accepted.status == 200)
        #expect(accepted.header("Spool-Max-Concurrent-Requests") == "2")
        #expect(server.collector.records().map(\.seq).sorted() == [0, 1, 2])
        await server.collector.stop()
    }

    /// Bodies still arriving hold no slot (issue #33: 8 slow senders held all 8 slots for up
    /// to 30 s and everyone else got 503): with three times as many senders as slots whose
    /// bodies do not finish within this test, a normal batch is served at once. (Six: the
    /// test client keeps at most 8 connections to a host.)
    @Test func bodiesStillArrivingHoldNoSlot() async throws {
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 2
            $0.bodyTimeout = .seconds(600)
            $0.bodyReadTimeout = .seconds(600)
        }
        let slow = (0..<6).map { _ in HeldRequest(server, seq: 0) }
        for _ in 0..<30_000 where server.collector.stats.requests < 6 {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(server.collector.stats.requests == 6)
        let accepted = try await server.post(batch: body(.json, seqs: 1...1), seqs: 1...1, format: .json)
        #expect(accepted.status == 200, "\(accepted.body)")
        #expect(server.collector.stats.overloaded == 0)
        // Their bodies arriving one by one, each is then served.
        for request in slow {
            request.release()
            #expect(try await request.answer.value.status == 200)
        }
        #expect(server.collector.records().map(\.seq).sorted() == [0, 1])
        #expect(server.collector.bodyBytesHeld.withLock { $0 } == 0)
        await server.collector.stop()
    }

    /// The bodies being read share a budget of `maxConcurrentRequests` × `maxBodyBytes`, each
    /// holding the bytes it has sent: one whose bytes would pass it is answered 503, and its
    /// bytes are given back.
    @Test func bodiesPastTheBudgetAreAnswered503() async throws {
        let one = body(.json, seqs: 0...0).count
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 1
            $0.maxBodyBytes = one
            $0.bodyTimeout = .seconds(600)
            $0.bodyReadTimeout = .seconds(600)
        }
        let held = HeldRequest(server, seq: 0)  // its first byte leaves no room for another body
        for _ in 0..<30_000 where server.collector.bodyBytesHeld.withLock({ $0 }) < 1 {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(server.collector.bodyBytesHeld.withLock { $0 } == 1, "a body holds what it sent, not its Content-Length")
        let refused = try await server.post(batch: body(.json, seqs: 1...1), seqs: 1...1, format: .json)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == nil)  // a slot frees within a round trip
        held.release()
        #expect(try await held.answer.value.status == 200)
        let accepted = try await server.post(batch: body(.json, seqs: 1...1), seqs: 1...1, format: .json)
        #expect(accepted.status == 200)
        await server.collector.stop()
    }

    /// A 5 MB header (issue #33: no answer and no close for 30 s and more) is answered 431
    /// with a body saying why, and the connection is closed; the client, still writing its
    /// header when the answer comes, finishes and reads it.
    @Test(arguments: [200 * 1024, 5 * 1024 * 1024])
    func anOversizedHeaderIsAnswered431(size: Int) async throws {
        let server = try await TestServer.start { $0.bodyTimeout = .seconds(600) }
        let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + String(repeating: "a", count: size) + "\r\n\r\n"
        let answer = await RawConnection(port: server.port).exchange(Array(head.utf8))
        #expect(answer.text.hasPrefix("HTTP/1.1 431"), "\(answer.text.prefix(200))")
        #expect(answer.text.contains("headers are larger"))
        #expect(answer.closed, "the connection stays open")
        // The collector still serves.
        #expect(try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json).status == 200)
        await server.collector.stop()
    }

    /// A request NIO's parser refuses, followed by 5 MB the server never parses, is answered
    /// 400 and closed, and the client reads the answer (Hummingbird's own 400 stopped reading,
    /// so a client still writing never did).
    @Test func aMalformedRequestIsAnswered400AndClosed() async throws {
        let server = try await TestServer.start { $0.bodyTimeout = .seconds(600) }
        let request = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header: x\r\n\r\n" + String(repeating: "a", count: 5 * 1024 * 1024)
        let answer = await RawConnection(port: server.port).exchange(Array(request.utf8))
        #expect(answer.text.hasPrefix("HTTP/1.1 400"), "\(answer.text.prefix(200))")
        #expect(answer.text.contains("not valid HTTP"))
        #expect(answer.closed)
        await server.collector.stop()
    }

    /// A head that trickles in (slowloris) gets `headerTimeout`, then its connection is
    /// closed; before, only the idle timer closed it (here 20 minutes).
    @Test func aHeadThatTricklesInIsClosedAfterTheHeaderTimeout() async throws {
        let server = try await TestServer.start {
            $0.headerTimeout = .milliseconds(500)
            $0.bodyTimeout = .seconds(600)
        }
        let connection = RawConnection(port: server.port)
        let trickle = Task.detached {
            for byte in Array("POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 10_000) {
                guard connection.send([byte]) else { return }
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
        let answer = await connection.exchange()
        trickle.cancel()
        #expect(answer.closed, "no close within the client's 120 s guard")
        #expect(answer.text.isEmpty)
        await server.collector.stop()
    }

    @Test func aStalledBodyIsAnswered408AndFreesItsSlot() async throws {
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 1
            $0.bodyTimeout = .milliseconds(300)
        }
        // Sends one byte of its body, then nothing: without the timeout it would hold the only
        // slot for as long as its connection stays open.
        let answer = await stalledPost(port: server.port)
        #expect(answer.hasPrefix("HTTP/1.1 408"))
        #expect(server.collector.stats.rejectedBatches == 1)
        let accepted = try await server.post(batch: body(.json, seqs: 1...1), seqs: 1...1, format: .json)
        #expect(accepted.status == 200)
        #expect(server.collector.records().map(\.seq) == [1])
        await server.collector.stop()
    }

    /// Eight senders that stall mid-body hold the eight slots only for `bodyReadTimeout`, not
    /// `bodyTimeout` (here 10 minutes): each is answered 408, and a normal request is then
    /// served while their connections are still open (issue #21, item 12).
    @Test func stalledBodiesFreeTheirSlotsAfterTheReadTimeout() async throws {
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 8
            $0.bodyTimeout = .seconds(600)
            $0.bodyReadTimeout = .seconds(1)
        }
        let stalled = (0..<8).map { _ in StalledConnection(port: server.port) }
        defer { for connection in stalled { connection.close() } }
        let answers = await withTaskGroup(of: String.self) { group in
            for connection in stalled { group.addTask { await connection.answerHead() } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.count == 8)
        #expect(answers.allSatisfy { $0.hasPrefix("HTTP/1.1 408") }, "\(answers)")
        #expect(server.collector.stats.rejectedBatches == 8)
        let accepted = try await server.post(batch: body(.json, seqs: 1...1), seqs: 1...1, format: .json)
        #expect(accepted.status == 200)
        #expect(server.collector.records().map(\.seq) == [1])
        await server.collector.stop()
    }

    @Test func timeoutsAndRatesOutOfRangeAreRefused() async throws {
        var configuration = CollectorConfiguration()
        configuration.bodyReadTimeout = .zero
        #expect(throws: (any Error).self) { try configuration.validate() }
        configuration = CollectorConfiguration()
        configuration.headerTimeout = .zero
        #expect(throws: (any Error).self) { try configuration.validate() }
        for rate in [0, -1, (1 << 30) + 1] {
            configuration = CollectorConfiguration()
            configuration.minBodyBytesPerSecond = rate
            #expect(throws: (any Error).self) { try configuration.validate() }
        }
        configuration = CollectorConfiguration()
        configuration.minBodyBytesPerSecond = 1 << 30
        try configuration.validate()
    }

    @Test func hugeClaimedRangesInRefusedBatchesSaturateTheCount() async throws {
        let server = try await TestServer.start()
        // Refused (415) twice, each claiming 2^64 - 1 records: the count saturates, no trap.
        for _ in 0..<2 {
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(server.port)/batch")
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "text/plain")
            request.headers.add(name: "Spool-Batch", value: "\(testLog):0-18446744073709551614")
            request.body = .bytes(ByteBuffer(string: "x"))
            let response = try await testClient.execute(request, timeout: .seconds(60))
            #expect(response.status.code == 415)
        }
        #expect(server.collector.stats.rejectedRecords == Int.max)
        #expect(server.collector.stats.rejectedBatches == 2)
        await server.collector.stop()
    }

    @Test func aNonPositiveLimitIsRefused() async throws {
        let collector = Collector(configuration: { var configuration = CollectorConfiguration(); configuration.maxConcurrentRequests = 0; return configuration }())
        await #expect(throws: (any Error).self) { _ = try await collector.start() }
    }
}

/// A client that sends a request's head and the first byte of its 1,000-byte body, then
/// nothing, and keeps its connection open until ``close()``.
private final class StalledConnection: Sendable {
    private let connection: RawConnection

    init(port: Int) {
        connection = RawConnection(port: port)
        let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Spool-Batch: \(testLog):0-0\r\nContent-Length: 1000\r\n\r\n["
        _ = connection.send(Array(head.utf8))
    }

    /// The head of the server's answer, or what it wrote before closing the connection (or
    /// 120 s passed without a byte: a hang guard; the collector's idle timer closes the
    /// connection sooner).
    func answerHead() async -> String {
        // The status line and headers are all the tests read.
        await connection.exchange { String(decoding: $0, as: UTF8.self).contains("\r\n\r\n") }.text
    }

    func close() { connection.close() }
}

/// The head of the answer to a ``StalledConnection``, its connection closed afterwards.
private func stalledPost(port: Int) async -> String {
    let connection = StalledConnection(port: port)
    defer { connection.close() }
    return await connection.answerHead()
}

/// A client on a raw socket: sends bytes as given (no HTTP library to refuse an oversized
/// header), and reads the server's answer on a thread of its own.
private final class RawConnection: Sendable {
    private let fd: Int32

    init(port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { Glibc.close(fd) }

    /// Ends the connection both ways (the descriptor is closed with the object).
    func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Sends all of `bytes`; false when the connection refused them (or 120 s passed).
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { return false }
            sent += count
        }
        return true
    }

    /// Sends `bytes` (as far as the server takes them), then reads until `enough` says so of
    /// what arrived, or the server closes the connection (`closed`), or 120 s pass without a
    /// byte (a hang guard), on a thread of its own.
    func exchange(_ bytes: [UInt8] = [], until enough: @escaping @Sendable ([UInt8]) -> Bool = { _ in false }) async -> (text: String, closed: Bool) {
        await withCheckedContinuation { continuation in
            Thread { [self] in
                _ = self.send(bytes)
                var answer = [UInt8]()
                var buffer = [UInt8](repeating: 0, count: 4096)
                var closed = false
                while !enough(answer) {
                    let count = recv(self.fd, &buffer, buffer.count, 0)
                    // A reset after the answer is a close too (the answer is what counts).
                    if count == 0 || (count < 0 && errno == ECONNRESET) { closed = true }
                    if count <= 0 { break }
                    answer += buffer[..<count]
                }
                continuation.resume(returning: (String(decoding: answer, as: UTF8.self), closed))
            }.start()
        }
    }

}
