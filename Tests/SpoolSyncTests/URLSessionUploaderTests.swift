import Foundation
import Spool
import Testing
@testable import SpoolSync

/// `URLSessionUploader` over real HTTP on 127.0.0.1.
@Suite struct URLSessionUploaderTests {
    /// URLSession would resend the POST as a GET without its body, and the GET's 200 would
    /// commit a batch that never arrived.
    @Test(arguments: [301, 302, 303])
    func redirectIsNotFollowedAndNothingIsCommitted(status: Int) async throws {
        let server = try RedirectingServer(status: status)
        defer { server.stop() }
        let source = MemorySource(records: 3)
        let uploader = URLSessionUploader(url: URL(string: "http://127.0.0.1:\(server.port)/batch")!)
        let worker = try SyncWorker(
            source: source, uploader: uploader, configuration: .manual, deadLetters: nil, clock: ContinuousClock())
        let report = await worker.flush()
        #expect(report.failure?.code == .unexpectedResponse)
        #expect(report.failure?.status == status)
        #expect(report.records == 0)
        #expect(source.committedOffset == 0)
        #expect(server.count("POST") == 1)
        #expect(server.count("GET") == 0)
        await worker.stop()
    }
}
