import AsyncHTTPClient
import Foundation
import Spool
import Testing
@testable import SpoolSync

/// The uploaders and redirects, over real HTTP on 127.0.0.1.
@Suite struct URLSessionUploaderTests {
    /// URLSession would resend the POST as a GET without its body, and the GET's 200 would
    /// commit a batch that never arrived.
    @Test(arguments: [301, 302, 303])
    func redirectIsNotFollowedAndNothingIsCommitted(status: Int) async throws {
        let server = try RedirectingServer(status: status)
        defer { server.stop() }
        let consumer = MemoryConsumer(records: 3)
        let uploader = URLSessionUploader(url: URL(string: "http://127.0.0.1:\(server.port)/batch")!)
        let worker = try SyncWorker(
            consumer: consumer, uploader: uploader, configuration: .manual, deadLetters: nil, clock: ContinuousClock())
        let report = await worker.flush()
        #expect(report.failure?.code == .unexpectedResponse)
        #expect(report.failure?.status == status)
        #expect(report.records == 0)
        #expect(consumer.committed == 0)
        #expect(server.count("POST") == 1)
        #expect(server.count("GET") == 0)
        await worker.stop()
    }

    /// AsyncHTTPClient's default configuration follows redirects, turning the POST into a GET
    /// without its body: given such a client, the uploader still reports the 3xx.
    @Test(arguments: [301, 302, 303])
    func aClientThatFollowsRedirectsStillCommitsNothing(status: Int) async throws {
        let (report, committed, server) = try await flushThroughAFollowingClient(redirect: status)
        #expect(server.count("GET") == 1)  // the client did follow: this is the case at stake
        #expect(report.failure?.code == .unexpectedResponse)
        #expect(report.failure?.status == status)
        #expect(report.records == 0)
        #expect(committed == 0)
    }

    /// 307 and 308 re-send the POST with its body: the batch arrived, and is committed once,
    /// not reported as a redirect and re-sent for ever.
    @Test(arguments: [307, 308])
    func aRedirectThatKeepsThePostDeliversTheBatch(status: Int) async throws {
        let (report, committed, server) = try await flushThroughAFollowingClient(redirect: status)
        #expect(report.failure == nil)
        #expect(report.records == 3)
        #expect(committed == 3)
        #expect(server.count("POST") == 2)  // the first, then the same POST at /moved
        #expect(server.count("GET") == 0)
    }

    /// One flush of 3 records through `HTTPClientUploader` with a client that follows
    /// redirects (AsyncHTTPClient's default), to a server answering POSTs with `redirect`.
    private func flushThroughAFollowingClient(redirect status: Int) async throws -> (FlushReport, UInt64, RedirectingServer) {
        let server = try RedirectingServer(status: status)
        defer { server.stop() }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)
        let consumer = MemoryConsumer(records: 3)
        let uploader = HTTPClientUploader(url: URL(string: "http://127.0.0.1:\(server.port)/batch")!, client: client)
        let worker = try SyncWorker(
            consumer: consumer, uploader: uploader, configuration: .manual, deadLetters: nil, clock: ContinuousClock())
        let report = await worker.flush()
        await worker.stop()
        try await client.shutdown()
        return (report, consumer.committed, server)
    }
}
