import Foundation
import Testing

/// Slow senders cannot starve a `spool collector` process (issue 50, item 3): a body holds of
/// the body budget what it has sent, not what it declared, and one slower than the minimum
/// rate is answered 408 long before the body timeout.
@Suite struct SlowSenderTests {
    /// As many senders as request slots, each declaring 16 MiB and sending a byte every 2 s
    /// (reconnecting when answered), beside two healthy clients posting one record a second
    /// for 20 s: at least 95% of the healthy posts are answered 2xx, their p99 under a second
    /// (a bound on starvation, not a benchmark: a refused or queued post takes seconds), and
    /// each slow body is answered 408 by the minimum rate, well before the 30 s body timeout.
    @Test func slowSendersDoNotStarveHealthyClients() throws {
        let directory = temporaryDirectory()
        let collector = try CollectorChild(["--max-concurrent", "8", "--out", directory + "/out.ndjson"], stderrPath: directory + "/stderr")
        defer { collector.stop() }
        let port = collector.port
        // Threads of their own, started at once: a busy cooperative pool must not delay them.
        let stop = Mutexed(false)
        let slow = (0..<8).map { sender in Self.onOwnThread { Self.sendSlowly(port: port, sender: sender, until: stop) } }
        Thread.sleep(forTimeInterval: 0.5)  // their heads are in
        let healthy = (0..<2).map { client in Self.onOwnThread { Self.postEverySecond(port: port, client: client, count: 20) } }
        let posts = healthy.flatMap { $0() }
        stop.set(true)
        let slowAnswers = slow.flatMap { $0() }

        #expect(posts.count == 40)
        let served = posts.filter { (200..<300).contains($0.status) }.count
        #expect(Double(served) >= 0.95 * Double(posts.count), "\(posts.map(\.status))")
        let latencies = posts.map(\.seconds).sorted()
        let p99 = latencies[min(latencies.count - 1, Int((0.99 * Double(latencies.count)).rounded(.up)) - 1)]
        #expect(p99 < 1, "healthy latencies: \(latencies)")
        // Every slow body ended with 408, from the minimum rate (5 s of grace), not the 30 s limit.
        #expect(slowAnswers.count >= 8, "\(slowAnswers)")
        #expect(slowAnswers.allSatisfy { $0.status == 408 && $0.seconds < 15 }, "\(slowAnswers)")
    }

    /// A rate of 0 would turn the minimum off: it is a usage error naming the setting.
    @Test func aMinimumBodyRateOutOfRangeIsAUsageError() throws {
        for rate in ["0", "1073741825"] {
            let result = try SpoolBinary.run(["collector", "--min-body-rate", rate])
            #expect(result.status != 0)
            #expect(result.stderr.contains("minBodyBytesPerSecond is \(rate)"), "\(result.stderr)")
        }
    }

    /// Runs `body` on a thread of its own; the function returned waits for its result.
    static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> () -> T {
        let result = Mutexed<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            result.set(body())
            done.signal()
        }
        return {
            done.wait()
            return result.get()!
        }
    }

    /// Declares 16 MiB and sends one byte every 2 s until answered, then reconnects, until
    /// `stop` is set. Returns each answer's status and how long after its connection it came.
    static func sendSlowly(port: Int, sender: Int, until stop: Mutexed<Bool>) -> [(status: Int, seconds: Double)] {
        var answers: [(status: Int, seconds: Double)] = []
        let log = String(repeating: "a", count: 31) + String(sender % 10)
        while !stop.get() {
            let socket = LoopbackSocket(port: port)
            let opened = Date()
            let head = "POST /batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + "Spool-Batch: \(log):0-0\r\nContent-Length: 16777216\r\n\r\n["
            guard socket.send(head) else { continue }
            while !stop.get() {
                if socket.readable(within: 2000) {
                    let answer = socket.answer()
                    answers.append((answer.status, Date().timeIntervalSince(opened)))
                    break
                }
                guard socket.send(" ") else { break }
            }
        }
        return answers
    }

    /// Posts `count` one-record batches, one a second, each on a new connection: each post's
    /// status (0 if none came within 30 s) and how long it took.
    static func postEverySecond(port: Int, client: Int, count: Int) -> [(status: Int, seconds: Double)] {
        var posts: [(status: Int, seconds: Double)] = []
        let log = String(repeating: "b", count: 31) + String(client)
        var next = Date()
        for seq in 0..<count {
            let socket = LoopbackSocket(port: port)
            let start = Date()
            let answer = socket.send(oneRecordRequest(log: log, seq: seq)) ? socket.answer() : LoopbackSocket.Answer([], closed: true)
            posts.append((answer.status, Date().timeIntervalSince(start)))
            next += 1
            Thread.sleep(until: next)
        }
        return posts
    }
}
