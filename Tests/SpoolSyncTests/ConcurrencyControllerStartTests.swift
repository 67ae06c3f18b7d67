import Testing
@testable import SpoolSync

/// Issue #34's steady start, on a manual clock: a server 2 ms away whose accept queue holds a
/// few connections (one connection a request, one request at a time, as Python's
/// `http.server`). The fast start's bursts overflow it: the connections past the queue have
/// their SYNs dropped and stall a second each. The controller must end the fast start at the
/// level the server took, not at half of a limit that kept doubling while the stalls went
/// unseen (past the queue again, so that requests kept stalling, and a short drain ended
/// whenever its last stall did), and not at 1; and it must not stay stuck there when the
/// server takes more.
@Suite struct ConcurrencyControllerStartTests {
    static let rtt: Duration = .milliseconds(2)

    /// The window against the server: `controller.limit` requests in flight; a request sent
    /// while `queue` others are at the server stalls a second; every other request is answered
    /// one round trip later. Stalls are reported late (once each, past
    /// ``ConcurrencyController/lateAfter``) at each round trip's answers, as the state machine does.
    struct AcceptQueue {
        var controller: ConcurrencyController
        var queue: Int
        var now: Duration = .zero
        /// Requests the server holds: answered at the end of the round trip.
        var served: [Duration] = []
        var stalled: [(sent: Duration, reported: Bool)] = []
        /// When each stalled request was sent.
        var stalls: [Duration] = []

        init(queue: Int, maximum: Int = 32) {
            controller = ConcurrencyController(.adaptive(max: maximum))
            self.queue = queue
        }

        mutating func roundTrip() {
            var inFlight = stalled.count
            while inFlight < controller.limit {
                inFlight += 1
                controller.sent(inFlight: inFlight, now: now)
                if served.count < queue {
                    served.append(now)
                } else {
                    stalled.append((now, false))
                    stalls.append(now)
                }
            }
            now += ConcurrencyControllerStartTests.rtt
            if let after = controller.lateAfter {
                for index in stalled.indices where !stalled[index].reported && now - stalled[index].sent > after {
                    stalled[index].reported = true
                    controller.late(sent: stalled[index].sent, now: now)
                }
            }
            for sent in served { controller.answered(roundTrip: now - sent, .accepted, now: now) }
            served.removeAll()
            for request in stalled where now - request.sent >= .seconds(1) {
                controller.answered(roundTrip: now - request.sent, .accepted, wasLate: request.reported, now: now)
            }
            stalled.removeAll { now - $0.sent >= .seconds(1) }
        }

        mutating func run(for duration: Duration) {
            let end = now + duration
            while now < end { roundTrip() }
        }
    }

    /// A burst to 15 and more stalls the connections past a queue of 7 (the five of the listen
    /// backlog, one more the kernel allows, one at the server). The stalls count as one
    /// overflow: the fast start ends at the 7 the server took, and the limit stays there.
    @Test func aBurstPastTheAcceptQueueEndsTheFastStartAtTheLevelThatWorked() {
        var window = AcceptQueue(queue: 7)
        window.run(for: .seconds(1))
        #expect(!window.controller.fastStart)
        #expect(window.controller.ceiling == 7)
        #expect(window.controller.limit == 7)
        let burst = window.stalls.count
        window.run(for: .seconds(5))
        #expect(window.controller.limit >= 6 && window.controller.limit <= 8)
        // After the start, only probes past the ceiling stall, each once, ever more rarely.
        let later = window.stalls.count - burst
        #expect(later <= 8, "\(later) requests stalled after the start")
    }

    /// Half the limit (the old rule) would have been 16: past the queue, a stall every round trip.
    @Test func theFastStartDoesNotEndAtHalfALimitThatKeptDoubling() {
        var window = AcceptQueue(queue: 7)
        while window.controller.fastStart && window.now < .seconds(1) { window.roundTrip() }
        #expect(window.controller.peak == 32)  // the limit doubled while the stalls went unseen
        #expect(window.controller.limit < 16)
        #expect(window.controller.limit > 1)
    }

    /// The server takes more later (a second worker): probes past the ceiling are taken, and
    /// the limit climbs past the old level.
    @Test func theLimitDoesNotStayStuckAtTheQueue() {
        var window = AcceptQueue(queue: 7)
        window.run(for: .seconds(3))
        #expect(window.controller.limit <= 8)
        window.queue = 14
        window.run(for: .seconds(20))
        #expect(window.controller.limit >= 11)
    }

    /// A probe whose request stalls is refused: back to the ceiling, and the next probe waits
    /// twice as long.
    @Test func aProbeWhoseRequestStallsIsRefused() {
        var window = AcceptQueue(queue: 7)
        window.run(for: .seconds(2))
        let interval = window.controller.stepsBetweenProbes
        while window.controller.probeSince == nil { window.roundTrip() }
        #expect(window.controller.limit == 8)
        while window.controller.probeSince != nil { window.roundTrip() }
        #expect(window.controller.limit == 7)
        #expect(window.controller.ceiling == 7)
        #expect(window.controller.stepsBetweenProbes == 2 * interval)
    }

    /// A server that serves `workers` requests at once and queues the rest (Python's threaded
    /// server, its interpreter lock letting about two run): the round trip is the path's plus
    /// the service time for each turn a request waits.
    static func queueing(level: Int, workers: Int = 2) -> Duration {
        .microseconds(500) + .microseconds(700) * ((level + workers - 1) / workers)
    }

    /// Answers that waited as long as they were served grow nothing: against a server that
    /// queues past two requests, the limit stops where the round trip doubled, far below a
    /// burst that would overflow a small accept queue, and stays there.
    @Test func growthStopsWhereTheRoundTripDoubles() {
        var simulation = ConcurrencyControllerTests.Simulation(.adaptive(max: 32))
        var levels: [Int] = []
        for _ in 0..<2_000 {
            levels.append(simulation.controller.limit)
            simulation.epoch(rtt: Self.queueing(level: simulation.controller.limit))
        }
        // 1.2 ms at 1 and 2 in flight, 1.9 at 4: the fast start doubles on to 8, where 3.3 ms
        // is more than twice the floor, and no answer grows the limit any more.
        #expect(simulation.controller.peak == 8, "levels \(levels.prefix(20))")
        #expect(simulation.controller.limit == 8)
        #expect(simulation.controller.ceiling == nil)  // held, not refused
    }

    /// The same server, declaring with each answer how many requests it takes at once (a Spool
    /// collector's `Spool-Max-Concurrent-Requests`): a destination that refuses past its
    /// capacity does not hold the growth on its queue, and the fast start doubles on to the
    /// maximum; answers that declare nothing hold it again.
    @Test func aDestinationThatDeclaresItsCapacityIsNotHeldByItsQueue() {
        var simulation = ConcurrencyControllerTests.Simulation(.adaptive(max: 32))
        simulation.controller.destinationDeclared(capacity: 64)
        for _ in 0..<20 { simulation.epoch(rtt: Self.queueing(level: simulation.controller.limit)) }
        #expect(simulation.controller.limit == 32)
        #expect(simulation.controller.fastStart)

        var silent = ConcurrencyControllerTests.Simulation(.adaptive(max: 32))
        silent.controller.destinationDeclared(capacity: 64)
        silent.epoch(rtt: Self.queueing(level: 1))
        silent.controller.destinationDeclared(capacity: nil)
        for _ in 0..<20 { silent.epoch(rtt: Self.queueing(level: silent.controller.limit)) }
        #expect(silent.controller.peak == 8)
    }

    /// The same server, refusing past 6 at once (PostgreSQL past `max_connections`): the
    /// queue holds the fast start at 8, where a quarter of the answers are refused, under the
    /// half that makes a share. Refusals while the answers queue end the fast start, and the
    /// limit settles within the slots. Before, it stayed at 8 with a quarter refused for good.
    @Test func refusalsWhileTheAnswersQueueEndTheFastStart() throws {
        var controller = ConcurrencyController(.adaptive(max: 32))
        var now = Duration.zero
        var refused = 0
        for round in 0..<2_000 {
            let level = controller.limit
            for count in 1...level { controller.sent(inFlight: count, now: now) }
            let rtt = Self.queueing(level: min(level, 6))
            now += rtt
            if round >= 1_900 { refused += max(0, level - 6) }
            for _ in 6..<max(6, level) { controller.answered(roundTrip: rtt, .overloaded, now: now) }
            for _ in 0..<min(level, 6) { controller.answered(roundTrip: rtt, .accepted, now: now) }
        }
        #expect(!controller.fastStart)
        #expect(controller.decreases >= 1)
        #expect(try #require(controller.ceiling) <= 6)
        #expect(refused <= 2)  // a refused probe now and then, in the last 100 round trips
    }

    /// The same server on a path 50 ms long: the queue is small beside the path, so growth
    /// goes on to the maximum.
    @Test func aQueueSmallBesideThePathDoesNotHoldGrowth() {
        var simulation = ConcurrencyControllerTests.Simulation(.adaptive(max: 32))
        for _ in 0..<200 {
            simulation.epoch(rtt: .milliseconds(50) + Self.queueing(level: simulation.controller.limit))
        }
        #expect(simulation.controller.limit == 32)
    }
}
