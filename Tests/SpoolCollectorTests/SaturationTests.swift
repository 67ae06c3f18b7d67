import Foundation
import Testing
@testable import SpoolCollector

/// `/healthz` says when the collector cannot keep up (every request refused for load for
/// `Saturation.window`), and `/livez` never does.
@Suite struct SaturationTests {
    /// The rule itself, on instants given by the test.
    @Test func saturationNeedsAWindowOfRefusalsWithNoneAdmitted() {
        let start = ContinuousClock.now
        let window = Saturation.window
        var saturation = Saturation()
        #expect(!saturation.holds(at: start + window))
        saturation.refused(at: start)
        #expect(!saturation.holds(at: start + window / 2), "a moment of 503s is not saturation")
        saturation.refused(at: start + window / 2)
        #expect(saturation.holds(at: start + window), "refused for the whole window, the latest within it")
        #expect(!saturation.holds(at: start + window / 2 + window), "a quiet window ends it")
        saturation.refused(at: start + window * 2)
        saturation.admitted()
        #expect(!saturation.holds(at: start + window * 2), "one admitted request ends it")
        saturation.refused(at: start + window * 3)
        #expect(!saturation.holds(at: start + window * 3 + window / 2), "a new run of refusals starts a new window")
    }

    /// Every slot held by a request that does not finish (injected latency standing in for a
    /// hung disk): once every request has been refused for 5 s, `/healthz` answers 503 naming
    /// the load, never sooner, while `/livez` stays 200. (That one admitted request ends it is
    /// the rule's test above: here the slot stays stuck until the collector stops, whatever
    /// the machine's load.)
    @Test func healthSaysSaturatedWhileEverySlotIsStuck() async throws {
        let server = try await TestServer.start {
            $0.maxConcurrentRequests = 1
            $0.faults.latency = .seconds(600)
        }
        let stuck = Task { try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json) }
        for _ in 0..<30_000 where server.collector.inFlight.withLock({ $0 }) < 1 {
            try await Task.sleep(for: .milliseconds(2))
        }
        #expect(try await server.send(.GET, path: "/healthz").status == 200)
        var health = try await server.send(.GET, path: "/healthz")
        var firstRefusal: ContinuousClock.Instant?
        // One refused request every 200 ms or more, until health changes (bounded: 60 of them).
        for seq in UInt64(1)...60 where health.status == 200 {
            let sent = ContinuousClock.now  // no later than the collector's refusal
            let refused = try await server.post(batch: body(.json, seqs: seq...seq), seqs: seq...seq, format: .json)
            if refused.status == 503, firstRefusal == nil { firstRefusal = sent }
            try await Task.sleep(for: .milliseconds(200))
            health = try await server.send(.GET, path: "/healthz")
        }
        #expect(health.status == 503, "\(health.body)")
        #expect(health.body.contains("refused for load"), "\(health.body)")
        let since = try #require(firstRefusal)
        #expect(ContinuousClock.now - since >= Saturation.window, "saturated before a whole window of refusals")
        #expect(try await server.send(.GET, path: "/livez").status == 200)
        await server.collector.stop()  // cancels the stuck request after the grace period
        _ = try? await stuck.value
    }
}
