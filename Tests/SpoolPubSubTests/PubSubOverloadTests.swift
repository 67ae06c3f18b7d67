import Foundation
import Spool
import SpoolSync
import Testing
@testable import SpoolPubSub

/// Which of Pub/Sub's answers the sink marks ``SyncError/overloaded``, the one signal the
/// adaptive concurrency halves on (issue 34): the machine reads no status of its own.
@Suite struct PubSubOverloadTests {
    let sink: PubSubSink

    init() throws {
        sink = try PubSubSink(
            topic: "projects/spool-test/topics/overload", endpoint: URL(string: "http://127.0.0.1:1"),
            credentials: .unauthenticated, logID: .random())
    }

    func overloaded(_ status: Int) -> Bool? {
        if case .retry(let error) = sink.classify(UploadResponse(status: status), expecting: 1) { return error.overloaded }
        return nil
    }

    /// `RESOURCE_EXHAUSTED` (429) and `UNAVAILABLE` (503), and a proxy's 408: overload.
    @Test func resourceExhaustedAndUnavailableMeanOverload() {
        for status in [429, 503, 408] { #expect(overloaded(status) == true, "\(status)") }
    }

    /// Other retried answers (`INTERNAL`, `DEADLINE_EXCEEDED`, a cancelled call, a short list of
    /// ids) are retried without backing off the concurrency.
    @Test func otherRetriesDoNotMeanOverload() {
        for status in [200, 499, 500, 502, 504, 302] { #expect(overloaded(status) == false, "\(status)") }
    }
}
