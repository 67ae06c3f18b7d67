import Foundation
import Spool
import Testing
@testable import SpoolCollector

/// Injected faults happen as configured, and the seeded sequence reproduces.
@Suite struct FaultInjectionTests {
    @Test(arguments: [500, 503])
    func failureRateOneFailsEveryRequestWithRetryAfter(status: Int) async throws {
        let server = try await TestServer.start {
            $0.faults.failureRate = 1
            $0.faults.failureStatus = status
            $0.faults.retryAfterSeconds = 7
        }
        var answers: [Answer] = []
        for first: UInt64 in [0, 0, 3] {
            answers.append(try await server.post(batch: body(.json, seqs: first...first + 2), seqs: first...first + 2, format: .json))
        }
        await server.collector.stop()

        #expect(answers.map(\.status) == [status, status, status])
        #expect(answers.map { $0.header("Retry-After") } == ["7", "7", "7"])
        #expect(server.collector.records().isEmpty)
        #expect(server.collector.stats.faults.failures == 3)
        #expect(server.collector.stats.requests == 3)
    }

    @Test func failureWithoutRetryAfterSendsNoHeader() async throws {
        let server = try await TestServer.start { $0.faults.failureRate = 1 }
        let answer = try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        await server.collector.stop()
        #expect(answer.status == 503)
        #expect(answer.header("Retry-After") == nil)
    }

    @Test func rateLimitAnswers429WithRetryAfter() async throws {
        let server = try await TestServer.start {
            $0.faults.rateLimitRate = 1
            $0.faults.retryAfterSeconds = 2
        }
        let answer = try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        await server.collector.stop()
        #expect(answer.status == 429)
        #expect(answer.header("Retry-After") == "2")
        #expect(server.collector.stats.faults.rateLimited == 1)
        #expect(server.collector.records().isEmpty)
    }

    @Test func bodiesAbovePayloadTooLargeAboveAre413AndSmallerOnesPass() async throws {
        let small = body(.json, seqs: 0...1)
        let large = body(.json, seqs: 2...40)
        let server = try await TestServer.start { $0.faults.payloadTooLargeAbove = small.count }
        let tooLarge = try await server.post(batch: large, seqs: 2...40, format: .json)
        let fits = try await server.post(batch: small, seqs: 0...1, format: .json)
        await server.collector.stop()

        #expect(tooLarge.status == 413)
        #expect(fits.status == 200)
        #expect(server.collector.records().map(\.seq) == [0, 1])
        #expect(server.collector.stats.faults.payloadTooLarge == 1)
        #expect(server.collector.stats.rejectedRecords == 39)
    }

    @Test func latencyIsAddedToEveryAnswer() async throws {
        let server = try await TestServer.start { $0.faults.latency = .milliseconds(150) }
        let clock = ContinuousClock()
        let start = clock.now
        let answer = try await server.post(batch: body(.json, seqs: 0...0), seqs: 0...0, format: .json)
        let elapsed = clock.now - start
        await server.collector.stop()

        #expect(answer.status == 200)
        #expect(elapsed >= .milliseconds(150))
    }

    @Test func resetClosesTheConnectionWithoutAnAnswer() async throws {
        let server = try await TestServer.start { $0.faults.resetRate = 1 }
        await #expect(throws: (any Error).self) {
            try await server.post(batch: body(.json, seqs: 0...2), seqs: 0...2, format: .json)
        }
        await server.collector.stop()
        #expect(server.collector.stats.faults.resets == 1)
        #expect(server.collector.records().isEmpty)
    }

    @Test func poisonedRecordFailsItsWholeBatchWith400() async throws {
        let server = try await TestServer.start { $0.faults.poisonMarker = "POISON" }
        let poisoned = try await server.post(batch: body(.json, [(0, "1"), (1, #""POISON pill""#), (2, "3")]), seqs: 0...2, format: .json)
        let clean = try await server.post(batch: body(.json, seqs: 3...4), seqs: 3...4, format: .json)
        await server.collector.stop()

        #expect(poisoned.status == 400)
        #expect(clean.status == 200)
        #expect(server.collector.records().map(\.seq) == [3, 4])
        #expect(server.collector.stats.faults.poisoned == 1)
        #expect(server.collector.stats.rejectedRecords == 3)
    }

    @Test func sameSeedGivesTheSameFaultsOverHTTP() async throws {
        func statuses(seed: UInt64) async throws -> [Int] {
            let server = try await TestServer.start {
                $0.seed = seed
                $0.faults.failureRate = 0.4
                $0.faults.rateLimitRate = 0.2
            }
            var statuses: [Int] = []
            for seq: UInt64 in 0..<24 {
                statuses.append(try await server.post(batch: body(.json, seqs: seq...seq), seqs: seq...seq, format: .json).status)
            }
            await server.collector.stop()
            return statuses
        }
        let first = try await statuses(seed: 42)
        let second = try await statuses(seed: 42)
        #expect(first == second)
        #expect(Set(first) == [200, 429, 503], "24 draws at these rates hit every outcome")
    }

    @Test func injectorSequenceDependsOnlyOnTheSeed() {
        var faults = FaultConfiguration()
        faults.failureRate = 0.3
        faults.rateLimitRate = 0.1
        faults.resetRate = 0.1
        faults.latencyJitter = .milliseconds(100)
        func draws(_ seed: UInt64) -> [FaultInjector.Draw] {
            var injector = FaultInjector(faults: faults, seed: seed)
            return (0..<1000).map { _ in injector.next() }
        }
        let draws7 = draws(7)
        #expect(draws7 == draws(7))
        #expect(draws7 != draws(8))
        let failures = draws7.filter { $0.fault == .failure }.count
        let resets = draws7.filter { $0.fault == .reset }.count
        #expect((200...400).contains(failures))
        #expect((50...150).contains(resets))
        #expect(draws7.allSatisfy { $0.delay >= .zero && $0.delay < .milliseconds(100) })
    }

    @Test func splitMix64MatchesTheReferenceSequence() {
        // The first outputs of SplitMix64 seeded with 0 (Vigna's reference implementation).
        var random = SplitMix64(seed: 0)
        #expect(random.next() == 0xE220_A839_7B1D_CDAF)
        #expect(random.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(random.next() == 0x06C4_5D18_8009_454F)
    }

    @Test func invalidFaultConfigurationIsRefusedAtStart() async throws {
        var configuration = CollectorConfiguration()
        configuration.faults.failureRate = 0.7
        configuration.faults.resetRate = 0.5
        let collector = Collector(configuration: configuration)
        await #expect(throws: (any Error).self) { try await collector.start() }
    }
}
