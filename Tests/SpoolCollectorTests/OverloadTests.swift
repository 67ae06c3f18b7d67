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

/// A client on a socket of its own thread that sends a request's head and the first byte of
/// its 1,000-byte body, then nothing. Returns the head of the server's answer, or what it wrote
/// before closing the connection (or 120 s passed without a byte: the collector's idle timer
/// closes it sooner).
private func stalledPost(port: Int) async -> String {
    await withCheckedContinuation { continuation in
        Thread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard fd >= 0, connected == 0 else { return continuation.resume(returning: "connect failed") }
            var timeout = timeval(tv_sec: 120, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Spool-Batch: \(testLog):0-0\r\nContent-Length: 1000\r\n\r\n["
            _ = head.withCString { send(fd, $0, strlen($0), 0) }
            var answer = [UInt8]()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count <= 0 { break }
                answer += buffer[..<count]
                // The status line and headers are all the test reads.
                if String(decoding: answer, as: UTF8.self).contains("\r\n\r\n") { break }
            }
            continuation.resume(returning: String(decoding: answer, as: UTF8.self))
        }.start()
    }
}
