import Testing
@testable import SpoolSync

/// Each rule of ``ConcurrencyController``, alone, against a table: what tells strain from noise
/// (``ConcurrencyController/Strain``) and how the limit moves (``ConcurrencyController/Response``).
@Suite struct ConcurrencyStrainRuleTests {
    typealias Strain = ConcurrencyController.Strain

    /// Late past the average plus the larger of itself and 2.5 deviations, plus 50 ms of slack.
    @Test(arguments: [
        (average: Duration.milliseconds(2), deviation: Duration.zero, late: Duration.milliseconds(54)),
        (.milliseconds(50), .milliseconds(10), .milliseconds(150)),
        (.milliseconds(50), .milliseconds(40), .milliseconds(200)),
        (.seconds(1), .zero, .milliseconds(2_050)),
    ])
    func aRequestIsLatePastTheAverageItsDeviationsAndTheSlack(average: Duration, deviation: Duration, late: Duration) {
        #expect(Strain.lateAfter(average: average, deviation: deviation) == late)
    }

    /// Half of the last 32 answers, or the last `limit` (at least 4) in a row.
    @Test(arguments: [
        (recent: UInt32(0x5555_5555), answers: 32, limit: 32, share: true),  // 16 of 32, scattered
        (0x5555_5554, 32, 32, false),  // 15 of 32
        (0x5555_5554, 32, 2, false),  // 15 of 32, the newest accepted
        (0b1111, 4, 2, true),  // 4 in a row at 2 in flight
        (0b111, 3, 2, false),  // 3 answers known: no run of 4 yet
        (0b1110, 4, 2, false),  // the newest accepted breaks the run
        (0xFF, 8, 8, true),  // a round trip's worth in a row
        (0x7F, 8, 8, false),
        (0xFFFF, 16, 32, true),  // at 32 in flight only the quorum counts
    ])
    func overloadIsAShareAsAQuorumOrARun(recent: UInt32, answers: Int, limit: Int, share: Bool) {
        #expect(Strain.overloadIsAShare(recent: recent, answers: answers, limit: limit) == share)
    }

    /// Six of the last 32 requests late, wherever they fall.
    @Test(arguments: [
        (recent: UInt32(0b11_1111), share: true),
        (0b1_1111, false),
        (0x8421_0841, true),  // 6 scattered
        (0x8020_0841, false),  // 5 scattered
        (0, false),
    ])
    func stallsAreAShareAtSixOfThirtyTwo(recent: UInt32, share: Bool) {
        #expect(Strain.stallsAreAShare(recent: recent) == share)
    }

    /// More refusals than twice what the level below predicts, plus one.
    @Test(arguments: [
        (overloaded: 2, answers: 8, rate: 0.0, excess: true),
        (1, 8, 0.0, false),
        (5, 10, 0.2, false),  // 2 × 0.2 × 10 + 1 = 5: not more
        (6, 10, 0.2, true),
        (0, 0, 0.0, false),
    ])
    func aProbeDrawsExcessRefusalsPastTwiceTheShareBelowPlusOne(overloaded: Int, answers: Int, rate: Double, excess: Bool) {
        #expect(Strain.drawsExcessRefusals(overloaded: overloaded, answers: answers, rate: rate) == excess)
    }

    /// Refused on a round trip's worth of answers, two refusals at least, and excess ones.
    @Test(arguments: [
        (overloaded: 2, answers: 9, limit: 9, rate: 0.0, refused: true),
        (2, 8, 9, 0.0, false),  // not a round trip's worth of answers yet
        (1, 9, 9, 0.0, false),  // one refusal is chance
        (6, 10, 10, 0.2, true),
        (5, 10, 10, 0.2, false),  // a flaky balancer's share
    ])
    func aProbeIsRefusedOnARoundTripOfExcessRefusals(overloaded: Int, answers: Int, limit: Int, rate: Double, refused: Bool) {
        #expect(Strain.probeRefused(overloaded: overloaded, answers: answers, limit: limit, rate: rate) == refused)
    }

    /// Twice the shortest round trip lately or more: as much waiting as service.
    @Test(arguments: [
        (roundTrip: Duration.milliseconds(2), floor: Duration.milliseconds(1), queues: true),
        (.microseconds(1_999), .milliseconds(1), false),
        (.microseconds(3_200), .microseconds(1_200), true),  // Python's threaded server at 4 in flight
        (.microseconds(1_900), .microseconds(1_200), false),  // and at 2
        (.milliseconds(75), .milliseconds(50), false),  // a collector 50 ms away, half again
        (.milliseconds(50), .milliseconds(50), false),
    ])
    func aRoundTripQueuesAtTwiceTheFloor(roundTrip: Duration, floor: Duration, queues: Bool) {
        #expect(Strain.queues(roundTrip: roundTrip, floor: floor) == queues)
    }

    /// A queued answer holds growth unless the destination declared how many it takes at once.
    @Test(arguments: [
        (roundTrip: Duration.milliseconds(3), declared: Int?.none, holds: true),
        (.milliseconds(3), 64, false),  // a Spool collector: its refusals bound the growth
        (.milliseconds(1), nil, false),  // no queue
        (.milliseconds(1), 64, false),
    ])
    func aQueueHoldsGrowthUnlessTheDestinationDeclaredItsCapacity(roundTrip: Duration, declared: Int?, holds: Bool) {
        #expect(Strain.queueHoldsGrowth(roundTrip: roundTrip, floor: .milliseconds(1), declaredCapacity: declared) == holds)
    }

    /// Two refusals among the recent answers while the answers queue: a server at capacity.
    @Test(arguments: [
        (recent: UInt32(0b101), queueing: true, atCapacity: true),
        (0b1, true, false),  // one refusal is chance
        (0b1000_0000_0000_0000_0000_0000_0000_0001, true, true),  // anywhere in the window
        (0b11, false, false),  // refusals without a queue: left to the share (a flaky balancer)
        (0, true, false),
    ])
    func refusalsWhileTheAnswersQueueMeanCapacity(recent: UInt32, queueing: Bool, atCapacity: Bool) {
        #expect(Strain.refusesWhileQueueing(recent: recent, queueing: queueing) == atCapacity)
    }

    /// The floor is the shortest round trip of the last 10 s window and the one before: a
    /// shorter one counts at once, a longer one only once the shorter has aged out.
    @Test func theFloorIsTheShortestRoundTripOfTwoWindows() {
        var floor = ConcurrencyController.RoundTripFloor()
        #expect(floor.shortest == nil)
        floor.add(.milliseconds(10), now: .zero)
        floor.add(.milliseconds(50), now: .seconds(1))
        #expect(floor.shortest == .milliseconds(10))
        floor.add(.milliseconds(50), now: .seconds(10))  // a new window: the last one's 10 ms stays
        #expect(floor.shortest == .milliseconds(10))
        floor.add(.milliseconds(60), now: .seconds(20))  // and now it has aged out
        #expect(floor.shortest == .milliseconds(50))
        floor.add(.milliseconds(5), now: .seconds(21))
        #expect(floor.shortest == .milliseconds(5))
    }

    /// Little's law: the round trips answered over an epoch, divided by its length; at least 1.
    @Test(arguments: [
        (roundTrips: Duration.milliseconds(100), length: Duration.milliseconds(50), inHand: 2),
        (.milliseconds(350), .milliseconds(50), 7),
        (.milliseconds(10), .milliseconds(50), 1),
        (.milliseconds(74), .milliseconds(20), 4),
    ])
    func theServerHadInHandItsRoundTripsOverTheEpoch(roundTrips: Duration, length: Duration, inHand: Int) {
        #expect(Strain.inHand(roundTrips: roundTrips, over: length) == inHand)
    }
}

@Suite struct ConcurrencyResponseRuleTests {
    typealias Response = ConcurrencyController.Response

    /// One answer a step during the fast start (doubling), a round trip's worth after it.
    @Test(arguments: [(limit: 8, fastStart: true, answers: 1), (8, false, 8), (1, false, 1), (32, true, 1)])
    func growthTakesOneAnswerThenARoundTrip(limit: Int, fastStart: Bool, answers: Int) {
        #expect(Response.answersPerStep(limit: limit, fastStart: fastStart) == answers)
    }

    /// A tenth less, one at least, never below 1.
    @Test(arguments: [(limit: 1, after: 1), (2, 1), (9, 8), (10, 9), (32, 29), (64, 58)])
    func aGentleDecreaseTakesATenth(limit: Int, after: Int) {
        #expect(Response.gentleDecrease(limit) == after)
    }

    /// One less, never below 1.
    @Test(arguments: [(limit: 1, after: 1), (2, 1), (16, 15)])
    func aRefusedTrialStepsDownByOne(limit: Int, after: Int) {
        #expect(Response.stepDown(limit) == after)
    }

    /// Half, never below 1.
    @Test(arguments: [(limit: 1, after: 1), (2, 1), (3, 1), (32, 16), (33, 16)])
    func overloadHalvesTheLimit(limit: Int, after: Int) {
        #expect(Response.overloadDecrease(limit) == after)
    }

    /// At the level the server took, or half without it; never above the limit, never below 1.
    @Test(arguments: [
        (limit: 32, level: Int?.some(7), end: 7),
        (32, nil, 16),
        (8, 20, 8),
        (1, nil, 1),
        (32, 0, 1),
    ])
    func theFastStartEndsAtTheLevelTheServerTook(limit: Int, level: Int?, end: Int) {
        #expect(Response.fastStartEnd(limit: limit, level: level) == end)
    }

    /// Just below the strained level, and no higher than what the server took.
    @Test(arguments: [(limit: 16, served: Int?.none, ceiling: 15), (16, 8, 8), (16, 20, 15), (1, nil, 1), (2, 0, 1)])
    func theCeilingIsJustBelowTheStrainedLevel(limit: Int, served: Int?, ceiling: Int) {
        #expect(Response.ceiling(limit: limit, served: served) == ceiling)
    }

    /// A refused probe doubles the wait before the next, up to 1,280 round trips.
    @Test(arguments: [(steps: 20, next: 40), (640, 1280), (1000, 1280), (1280, 1280)])
    func aRefusedProbeDoublesTheWait(steps: Int, next: Int) {
        #expect(Response.probeIntervalAfterRefusal(steps) == next)
    }
}
