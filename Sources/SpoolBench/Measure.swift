#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// Monotonic nanoseconds (`CLOCK_MONOTONIC`): cheap enough to read around every call.
@inline(__always)
package func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// How long one measurement may run: it stops after `events` events or `seconds`,
/// whichever comes first, and reports the rate over what it did.
package struct Budget: Sendable {
    /// The most events one measurement writes.
    package var events: Int
    /// The most wall-clock seconds one measurement takes (checked between calls).
    package var seconds: Double

    package init(events: Int, seconds: Double) {
        self.events = events
        self.seconds = seconds
    }

    /// The deadline of a measurement started now, in ``monotonicNanos()``.
    package func deadline(from start: UInt64 = monotonicNanos()) -> UInt64 {
        start + UInt64(seconds * 1e9)
    }
}

/// What one measurement found: how much was done, how long it took, and optionally the
/// latency of each call.
package struct Run: Sendable {
    /// Events (or bytes, for byte-rate measurements) processed.
    package var count: Int
    /// Elapsed wall-clock nanoseconds.
    package var nanos: UInt64
    /// Per-call latencies, when the scenario times each call.
    package var latencies: Latencies?
    /// Bytes the store took on disk, when the scenario measured them.
    package var storedBytes: Int?
    /// A diagnostic shown beside the figure, e.g. events per `fdatasync`.
    package var note: String?

    package init(count: Int, nanos: UInt64, latencies: Latencies? = nil, storedBytes: Int? = nil) {
        self.count = count
        self.nanos = nanos
        self.latencies = latencies
        self.storedBytes = storedBytes
    }

    /// `count` per second.
    package var rate: Double { nanos == 0 ? 0 : Double(count) * 1e9 / Double(nanos) }
    /// Elapsed seconds.
    package var seconds: Double { Double(nanos) / 1e9 }
}

/// Runs `body(index)` on `count` new threads at once and returns their results in index
/// order, once all have finished. Producers run on real threads, not the cooperative pool,
/// because they make blocking calls.
func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
    let results = Mutex<[Int: Result<T, any Error>]>([:])
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        let thread = Thread {
            let result = Result { try body(index) }
            results.withLock { $0[index] = result }
            done.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    done.wait()
    let all = results.withLock { $0 }
    return try (0..<count).map { try all[$0]!.get() }
}

/// A counter that hands out event indexes to concurrent producers until `limit`.
final class Ticket: Sendable {
    private let next = Atomic<Int>(0)
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// The next index, or nil once `limit` are handed out.
    @inline(__always)
    func take() -> Int? {
        let value = next.wrappingAdd(1, ordering: .relaxed).oldValue
        return value < limit ? value : nil
    }

    /// How many indexes were handed out (at most `limit`).
    var taken: Int { min(limit, next.load(ordering: .relaxed)) }
}

/// Runs blocking `body` on a new thread and resumes with its result, keeping blocking
/// calls off the cooperative pool.
package func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

/// The request body both sides build for an upload: a JSON array of the events, as the
/// Sensors Analytics SDK sends it.
package func jsonArrayBody<C: Collection>(_ payloads: C) -> [UInt8] where C.Element == [UInt8] {
    var body = [UInt8]()
    body.reserveCapacity(payloads.reduce(2) { $0 + $1.count + 1 })
    body.append(UInt8(ascii: "["))
    var first = true
    for payload in payloads {
        if !first { body.append(UInt8(ascii: ",")) }
        first = false
        body.append(contentsOf: payload)
    }
    body.append(UInt8(ascii: "]"))
    return body
}
