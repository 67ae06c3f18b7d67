import Foundation
import Spool
import SpoolCollector
import Testing
@testable import SpoolSync

/// Limits the worker and the collector must agree on, over real HTTP on 127.0.0.1.
extension EndToEndTests {
    @Test func budgetShorterThanTheRequestTimeoutStillDelivers() async throws {
        let rig = try await Rig.make()
        try await rig.append(10)
        let worker = try rig.worker { $0.requestTimeout = .seconds(30) }
        // The iOS background recipe: a budget of about the request timeout, or less.
        let report = await worker.flush(within: .seconds(20), retries: Self.retries)
        #expect(report.failure == nil)
        #expect(report.records == 10)
        #expect(rig.receivedSeqs == Array(0..<10))
        await worker.stop()
        await rig.tearDown()
    }

    /// A record nested exactly as deep as the worker embeds as JSON arrives as JSON, whatever
    /// the layout adds around it; one level deeper travels as text (base64 in raw) and arrives
    /// as its exact bytes. Neither is refused.
    @Test(arguments: HTTPSink.Encoding.allCases)
    func nestingAtTheEmbeddingLimitIsAcceptedByTheCollector(encoding: HTTPSink.Encoding) async throws {
        func nested(_ depth: Int) -> String { String(repeating: "[", count: depth) + String(repeating: "]", count: depth) }
        let limit = JSONValidator.maxDepth
        let rig = try await Rig.make()
        try await rig.append(2) { nested(limit + $0) }
        let worker = try rig.worker { $0.http.encoding = encoding }
        let report = await worker.flush(retries: Self.retries)
        #expect(report.failure == nil)
        #expect(report.deadLettered == 0)
        let received = rig.collector.records()
        #expect(received.first?.data == nested(limit))
        #expect(try received.map(BinaryPayloadTests.bytes) == [nested(limit), nested(limit + 1)].map { Array($0.utf8) })
        await worker.stop()
        await rig.tearDown()
    }
}
