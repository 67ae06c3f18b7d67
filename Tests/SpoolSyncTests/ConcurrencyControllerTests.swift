import Testing
@testable import SpoolSync

/// The adaptive concurrency on its own: additive increase, multiplicative decrease, a
/// remembered ceiling, and no change from rounds that say nothing about the server.
@Suite struct ConcurrencyControllerTests {
    static let rtt: Duration = .milliseconds(50)

    /// `count` full rounds of `rtt` against a server that is overloaded past `capacity` requests.
    static func rounds(_ count: Int, of controller: inout ConcurrencyController, capacity: Int = .max) {
        for _ in 0..<count {
            controller.roundFinished(used: controller.limit, roundTrip: rtt, overloaded: controller.limit > capacity)
        }
    }

    @Test func fixedNeverMoves() {
        var controller = ConcurrencyController(.fixed(6))
        #expect(controller.limit == 6)
        controller.roundFinished(used: 6, roundTrip: Self.rtt, overloaded: true)
        controller.roundFinished(used: 6, roundTrip: .seconds(10), overloaded: false)
        #expect(controller.limit == 6)
    }

    @Test func adaptiveStartsAtOneAndDoublesUntilTheFirstSignOfStrainThenGrowsByOne() {
        var controller = ConcurrencyController(.adaptive(max: 40))
        var limits: [Int] = []
        for round in 0..<9 {
            limits.append(controller.limit)
            controller.roundFinished(used: controller.limit, roundTrip: Self.rtt, overloaded: round == 5)
        }
        // 1, 2, 4, 8, 16, 32 (overloaded: back to 16, its ceiling), then a probe after 20 rounds.
        #expect(limits == [1, 2, 4, 8, 16, 32, 16, 16, 16])
        #expect(controller.ceiling == 16)
        #expect(controller.peak == 32)
        #expect(!controller.slowStart)
    }

    @Test func theLimitNeverPassesTheMaximum() {
        var controller = ConcurrencyController(.adaptive(max: 5))
        Self.rounds(10, of: &controller)
        #expect(controller.limit == 5)
        #expect(controller.peak == 5)
    }

    @Test func aRoundThatDidNotFillTheLimitChangesNothing() {
        var controller = ConcurrencyController(.adaptive(max: 16))
        Self.rounds(2, of: &controller)
        #expect(controller.limit == 4)
        controller.roundFinished(used: 1, roundTrip: Self.rtt, overloaded: false)
        #expect(controller.limit == 4)
    }

    @Test func aServerThatShedsLoadSettlesTheLimitAtItsCapacity() {
        var controller = ConcurrencyController(.adaptive(max: 32))
        // A server that sheds load from 9 requests in flight on (the collector's --max-concurrent 8).
        var overloads = 0
        var limits: [Int] = []
        for _ in 0..<400 {
            let overloaded = controller.limit > 8
            if overloaded { overloads += 1 }
            controller.roundFinished(used: controller.limit, roundTrip: Self.rtt, overloaded: overloaded)
            limits.append(controller.limit)
        }
        #expect(controller.ceiling == 8)
        // Slow start overshot once (16: back to 8, the ceiling), and then each refused probe
        // doubled the wait before the next: 20, 40, 80, 160 rounds.
        #expect(overloads <= 5)
        #expect(controller.roundsBetweenProbes >= ConcurrencyController.probeInterval * 8)
        let settled = limits.suffix(100)
        #expect(Double(settled.reduce(0, +)) / Double(settled.count) >= 7.9)
        #expect(settled.allSatisfy { $0 <= 9 })
    }

    @Test func whenTheServerTakesFewerTheLimitHalvesAndTheCeilingComesDown() {
        var controller = ConcurrencyController(.adaptive(max: 32))
        var capacity = 8
        Self.rounds(100, of: &controller, capacity: capacity)
        #expect(controller.limit == 8)
        capacity = 4  // another client took half the server
        controller.roundFinished(used: 8, roundTrip: Self.rtt, overloaded: true)
        #expect(controller.limit == 4)  // halved at once, not back to the old ceiling
        Self.rounds(500, of: &controller, capacity: capacity)
        #expect(controller.ceiling == 4)
    }

    @Test func aProbeTheServerTakesRaisesTheCeiling() {
        var controller = ConcurrencyController(.adaptive(max: 32))
        var capacity = 8
        Self.rounds(100, of: &controller, capacity: capacity)
        #expect(controller.ceiling == 8)
        capacity = 12  // the server scaled out
        Self.rounds(2_000, of: &controller, capacity: capacity)
        #expect(controller.ceiling == 12)
        #expect(controller.limit == 12)
    }

    @Test func risingRoundTripsShrinkTheLimitByATenth() {
        var controller = ConcurrencyController(.adaptive(max: 64))
        Self.rounds(5, of: &controller)
        #expect(controller.limit == 32)
        controller.roundFinished(used: 32, roundTrip: Self.rtt * 3, overloaded: false)
        #expect(controller.limit == 29)
        #expect(!controller.slowStart)
        // Twice the floor plus the slack is still healthy.
        controller.roundFinished(used: 29, roundTrip: Self.rtt * 2, overloaded: false)
        #expect(controller.limit == 30)
    }

    @Test func aSlowerPathIsAcceptedAfterAWhile() {
        var controller = ConcurrencyController(.adaptive(max: 64))
        controller.roundFinished(used: 1, roundTrip: .milliseconds(10), overloaded: false)
        // The path became 5x slower for good: the floor drifts up and growth resumes.
        var grew = false
        for _ in 0..<200 {
            let before = controller.limit
            controller.roundFinished(used: controller.limit, roundTrip: .milliseconds(50), overloaded: false)
            if controller.limit > before { grew = true }
        }
        #expect(grew)
        #expect(controller.limit > 2)
    }

    @Test func theLimitNeverGoesBelowOne() {
        var controller = ConcurrencyController(.adaptive(max: 4))
        for _ in 0..<10 { controller.roundFinished(used: 1, roundTrip: Self.rtt, overloaded: true) }
        #expect(controller.limit == 1)
        controller.roundFinished(used: 1, roundTrip: .seconds(30), overloaded: false)
        #expect(controller.limit == 1)
    }
}
