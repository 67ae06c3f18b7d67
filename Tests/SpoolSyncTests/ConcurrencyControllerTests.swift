import Testing
@testable import SpoolSync

/// The adaptive concurrency on its own, on a manual clock: a fast start, additive increase,
/// multiplicative decrease on overload and on rising round trips, a remembered ceiling, no
/// growth on failures, and no change from epochs that say nothing about the server.
@Suite struct ConcurrencyControllerTests {
    static let rtt: Duration = .milliseconds(50)

    /// A simulated window against one server: `controller.limit` requests go out at `now`, and
    /// all are answered one round trip later with the signal `answer` gives for that level.
    struct Simulation {
        var controller: ConcurrencyController
        var now: Duration = .zero

        init(_ concurrency: SyncConfiguration.Concurrency) {
            controller = ConcurrencyController(concurrency)
        }

        mutating func epoch(rtt: Duration = ConcurrencyControllerTests.rtt, _ answer: (Int) -> ConcurrencyController.Signal = { _ in .accepted }) {
            let level = controller.limit
            for count in 1...level { controller.sent(inFlight: count, now: now) }
            now += rtt
            let signal = answer(level)
            for _ in 0..<level { controller.answered(roundTrip: rtt, signal, now: now) }
        }

        /// `count` epochs against a server overloaded past `capacity` requests.
        mutating func epochs(_ count: Int, capacity: Int = .max) {
            for _ in 0..<count { epoch { $0 > capacity ? .overloaded : .accepted } }
        }
    }

    @Test func fixedNeverMoves() {
        var simulation = Simulation(.fixed(6))
        #expect(simulation.controller.limit == 6)
        simulation.epoch { _ in .overloaded }
        simulation.epoch(rtt: .seconds(10))
        #expect(simulation.controller.limit == 6)
    }

    @Test func theFastStartDoublesUntilTheFirst503ThenGrowsByOne() {
        var simulation = Simulation(.adaptive(max: 40))
        var limits: [Int] = []
        for epoch in 0..<9 {
            limits.append(simulation.controller.limit)
            simulation.epoch { _ in epoch == 5 ? .overloaded : .accepted }
        }
        // 1, 2, 4, 8, 16, 32 (a 503: back to 16, its ceiling), then a probe only after 20 epochs.
        #expect(limits == [1, 2, 4, 8, 16, 32, 16, 16, 16])
        #expect(simulation.controller.ceiling == 16)
        #expect(simulation.controller.peak == 32)
        #expect(!simulation.controller.fastStart)
    }

    @Test func theLimitNeverPassesTheMaximum() {
        var simulation = Simulation(.adaptive(max: 5))
        simulation.epochs(10)
        #expect(simulation.controller.limit == 5)
        #expect(simulation.controller.peak == 5)
    }

    @Test func anEpochThatDidNotFillTheLimitChangesNothing() {
        var simulation = Simulation(.adaptive(max: 16))
        simulation.epochs(2)
        #expect(simulation.controller.limit == 4)
        for _ in 0..<3 {
            simulation.controller.sent(inFlight: 1, now: simulation.now)
            simulation.now += Self.rtt
            simulation.controller.answered(roundTrip: Self.rtt, .accepted, now: simulation.now)
        }
        #expect(simulation.controller.limit == 4)
    }

    /// Against an always-500 server (or a closed port) the limit never grows: only accepted
    /// answers are a reason to send more.
    @Test(arguments: [ConcurrencyController.Signal.failed, .neutral])
    func failuresNeverGrowTheLimit(signal: ConcurrencyController.Signal) {
        var simulation = Simulation(.adaptive(max: 16))
        simulation.epochs(2)
        #expect(simulation.controller.limit == 4)
        for _ in 0..<50 { simulation.epoch { _ in signal } }
        #expect(simulation.controller.limit == 4)
    }

    @Test func aServerThatShedsLoadSettlesTheLimitAtItsCapacity() {
        var simulation = Simulation(.adaptive(max: 32))
        // A server that sheds load from 9 requests in flight on (the collector's --max-concurrent 8).
        var overloads = 0
        var limits: [Int] = []
        for _ in 0..<400 {
            if simulation.controller.limit > 8 { overloads += 1 }
            simulation.epochs(1, capacity: 8)
            limits.append(simulation.controller.limit)
        }
        #expect(simulation.controller.ceiling == 8)
        // The fast start overshot once (16: back to 8, the ceiling), and then each refused probe
        // doubled the wait before the next: 20, 40, 80, 160 epochs.
        #expect(overloads <= 5)
        #expect(simulation.controller.stepsBetweenProbes >= ConcurrencyController.probeInterval * 8)
        let settled = limits.suffix(100)
        #expect(Double(settled.reduce(0, +)) / Double(settled.count) >= 7.9)
        #expect(settled.allSatisfy { $0 <= 9 })
    }

    @Test func whenTheServerTakesFewerTheLimitHalvesAndTheCeilingComesDown() {
        var simulation = Simulation(.adaptive(max: 32))
        simulation.epochs(100, capacity: 8)
        #expect(simulation.controller.limit == 8)
        // Another client took half the server.
        simulation.epochs(1, capacity: 4)
        #expect(simulation.controller.limit == 4)  // halved at once, not back to the old ceiling
        simulation.epochs(500, capacity: 4)
        #expect(simulation.controller.ceiling == 4)
    }

    @Test func aProbeTheServerTakesRaisesTheCeiling() {
        var simulation = Simulation(.adaptive(max: 32))
        simulation.epochs(100, capacity: 8)
        #expect(simulation.controller.ceiling == 8)
        simulation.epochs(2_000, capacity: 12)  // the server scaled out
        #expect(simulation.controller.ceiling == 12)
        #expect(simulation.controller.limit == 12)
    }

    @Test func risingRoundTripsShrinkTheLimitByATenth() {
        var simulation = Simulation(.adaptive(max: 64))
        simulation.epochs(5)
        #expect(simulation.controller.limit == 32)
        simulation.epochs(1)
        #expect(simulation.controller.limit == 64)
        #expect(simulation.controller.fastStart)
        // The round trip triples (a server that queues): once that epoch is judged (at the
        // next answers), the fast start ends at half.
        simulation.epoch(rtt: Self.rtt * 3)
        simulation.epochs(1)
        #expect(simulation.controller.limit == 32)
        #expect(!simulation.controller.fastStart)
        // Later rises take a tenth.
        for _ in 0..<30 { simulation.epochs(1) }
        simulation.epoch(rtt: Self.rtt * 4)
        let before = simulation.controller.limit
        simulation.epochs(2)
        #expect(simulation.controller.limit < before)
        #expect(simulation.controller.limit >= before - max(1, before / 10))
    }

    /// A full accept queue drops SYNs: the connections past it wait a second for the client's
    /// retransmit, with no 429 or 503. A request in flight that long is a sign of strain
    /// before it is answered.
    @Test func aStalledRequestIsSeenBeforeItsAnswer() {
        var simulation = Simulation(.adaptive(max: 16))
        simulation.epochs(3)
        #expect(simulation.controller.limit == 8)
        let stalled = simulation.now
        simulation.controller.sent(inFlight: 1, now: stalled)
        let after = try! #require(simulation.controller.lateAfter)
        #expect(after < .seconds(1))
        simulation.now += after + .milliseconds(1)
        simulation.controller.late(sent: stalled, now: simulation.now)
        #expect(simulation.controller.limit == 4)  // the fast start overshot: back to half
        #expect(simulation.controller.ceiling == 4)
    }

    @Test func oneDecreasePerRoundTripWhateverTheNumberOf503s() {
        var simulation = Simulation(.adaptive(max: 64))
        simulation.epochs(6)
        #expect(simulation.controller.limit == 64)
        simulation.epoch { _ in .overloaded }  // 64 answers 503 together: one halving
        #expect(simulation.controller.limit == 32)
    }

    @Test func aSlowerPathIsAcceptedAfterAWhile() {
        var simulation = Simulation(.adaptive(max: 64))
        simulation.epoch(rtt: .milliseconds(10))
        // The path became 5x slower for good: the average follows and growth resumes.
        var grew = false
        for _ in 0..<200 {
            let before = simulation.controller.limit
            simulation.epoch(rtt: .milliseconds(50))
            if simulation.controller.limit > before { grew = true }
        }
        #expect(grew)
        #expect(simulation.controller.limit > 2)
    }

    @Test func theLimitNeverGoesBelowOne() {
        var simulation = Simulation(.adaptive(max: 4))
        for _ in 0..<10 { simulation.epoch { _ in .overloaded } }
        #expect(simulation.controller.limit == 1)
        simulation.epoch(rtt: .seconds(30))
        #expect(simulation.controller.limit == 1)
    }
}
