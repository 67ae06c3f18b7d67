import AsyncHTTPClient
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

    @Test func aNonPositiveLimitIsRefused() async throws {
        let collector = Collector(configuration: { var configuration = CollectorConfiguration(); configuration.maxConcurrentRequests = 0; return configuration }())
        await #expect(throws: (any Error).self) { _ = try await collector.start() }
    }
}
