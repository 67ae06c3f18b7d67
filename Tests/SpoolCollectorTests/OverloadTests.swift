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

    @Test func requestsPastTheLimitAreAnswered503WithRetryAfter() async throws {
        let server = try await TestServer.start { $0.maxConcurrentRequests = 2 }
        let held = [HeldRequest(server, seq: 0), HeldRequest(server, seq: 1)]
        // Both are in the handler (counted) and wait for the rest of their bodies.
        for _ in 0..<30_000 where server.collector.stats.requests < 2 {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(server.collector.stats.requests == 2)

        let refused = try await server.post(batch: body(.json, seqs: 2...2), seqs: 2...2, format: .json)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == "1")
        #expect(server.collector.stats.overloaded == 1)

        for request in held { request.release() }
        for request in held { #expect(try await request.answer.value.status == 200) }
        // The slots are free again.
        let accepted = try await server.post(batch: body(.json, seqs: 2...2), seqs: 2...2, format: .json)
        #expect(accepted.status == 200)
        #expect(server.collector.records().map(\.seq).sorted() == [0, 1, 2])
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

    @Test func aZeroBodyReadTimeoutIsRefused() async throws {
        var configuration = CollectorConfiguration()
        configuration.bodyReadTimeout = .zero
        #expect(throws: (any Error).self) { try configuration.validate() }
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
    private let fd: Int32
    private let connected: Bool

    init(port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        connected = fd >= 0 && withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
        guard connected else { return }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "Spool-Batch: \(testLog):0-0\r\nContent-Length: 1000\r\n\r\n["
        _ = head.withCString { send(fd, $0, strlen($0), 0) }
    }

    /// The head of the server's answer, read on a thread of its own, or what it wrote before
    /// closing the connection (or 120 s passed without a byte: a hang guard; the collector's
    /// idle timer closes the connection sooner).
    func answerHead() async -> String {
        guard connected else { return "connect failed" }
        return await withCheckedContinuation { continuation in
            Thread { [fd] in
                var answer = [UInt8]()
                var buffer = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = recv(fd, &buffer, buffer.count, 0)
                    if count <= 0 { break }
                    answer += buffer[..<count]
                    // The status line and headers are all the tests read.
                    if String(decoding: answer, as: UTF8.self).contains("\r\n\r\n") { break }
                }
                continuation.resume(returning: String(decoding: answer, as: UTF8.self))
            }.start()
        }
    }

    func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
    }
}

/// The head of the answer to a ``StalledConnection``, its connection closed afterwards.
private func stalledPost(port: Int) async -> String {
    let connection = StalledConnection(port: port)
    defer { connection.close() }
    return await connection.answerHead()
}
